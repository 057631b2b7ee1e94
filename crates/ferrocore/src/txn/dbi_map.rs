//! The map from DB handle (dbi) to what a txn keeps of that DB.

/// Handles below this are looked up by indexing; others (a write txn parks the state of a
/// DB whose handle went to another DB under a number no handle has, counting down from
/// `u32::MAX`) by a scan of a short list.
const DIRECT: u32 = 1 << 12;

/// Map from DB handle to `V`. Handles are small numbers given out from 2 up, so a put,
/// which looks its DB up two or three times, finds it by indexing: a hash of the handle
/// cost as much as the rest of the look-up.
#[derive(Clone, Debug)]
pub(super) struct DbiMap<V> {
    /// Entries of handles below [`DIRECT`], indexed by handle.
    direct: Vec<Option<V>>,
    /// Entries of other numbers, in no order.
    other: Vec<(u32, V)>,
}

impl<V> Default for DbiMap<V> {
    fn default() -> Self {
        DbiMap {
            direct: Vec::new(),
            other: Vec::new(),
        }
    }
}

impl<V> DbiMap<V> {
    /// The entry of `dbi`.
    #[inline]
    pub(super) fn get(&self, dbi: u32) -> Option<&V> {
        if dbi < DIRECT {
            return self.direct.get(dbi as usize)?.as_ref();
        }
        self.other.iter().find(|(k, _)| *k == dbi).map(|(_, v)| v)
    }

    /// The entry of `dbi`, to change.
    #[inline]
    pub(super) fn get_mut(&mut self, dbi: u32) -> Option<&mut V> {
        if dbi < DIRECT {
            return self.direct.get_mut(dbi as usize)?.as_mut();
        }
        self.other
            .iter_mut()
            .find(|(k, _)| *k == dbi)
            .map(|(_, v)| v)
    }

    /// True if `dbi` has an entry.
    pub(super) fn contains_key(&self, dbi: u32) -> bool {
        self.get(dbi).is_some()
    }

    /// Sets the entry of `dbi`; returns the one it replaces.
    pub(super) fn insert(&mut self, dbi: u32, value: V) -> Option<V> {
        if dbi < DIRECT {
            let i = dbi as usize;
            if self.direct.len() <= i {
                // In one step to a few handles' room: a txn opens its DBs one by one.
                self.direct
                    .resize_with((i + 1).next_power_of_two().max(16), || None);
            }
            return self.direct[i].replace(value);
        }
        match self.other.iter_mut().find(|(k, _)| *k == dbi) {
            Some((_, v)) => Some(std::mem::replace(v, value)),
            None => {
                self.other.push((dbi, value));
                None
            }
        }
    }

    /// Removes the entry of `dbi` and returns it.
    pub(super) fn remove(&mut self, dbi: u32) -> Option<V> {
        if dbi < DIRECT {
            return self.direct.get_mut(dbi as usize)?.take();
        }
        let i = self.other.iter().position(|(k, _)| *k == dbi)?;
        Some(self.other.swap_remove(i).1)
    }

    /// True if the map has no slot at all (a txn that used no named DB). A map with
    /// slots may still hold no entry (`remove` leaves its slot empty).
    #[inline]
    pub(super) fn has_no_slots(&self) -> bool {
        self.direct.is_empty() && self.other.is_empty()
    }

    /// Removes every entry, keeping the room.
    pub(super) fn clear(&mut self) {
        self.direct.clear();
        self.other.clear();
    }

    /// The entries with their handles, direct ones first in handle order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &V)> {
        let direct = self
            .direct
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((i as u32, v.as_ref()?)));
        direct.chain(self.other.iter().map(|(k, v)| (*k, v)))
    }

    /// The entries.
    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    /// The entries, to change.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        let direct = self.direct.iter_mut().filter_map(Option::as_mut);
        direct.chain(self.other.iter_mut().map(|(_, v)| v))
    }
}

impl<V> std::ops::Index<u32> for DbiMap<V> {
    type Output = V;

    fn index(&self, dbi: u32) -> &V {
        self.get(dbi).expect("no entry for the handle")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_and_parked_entries_behave_as_a_map() {
        let mut m: DbiMap<&str> = DbiMap::default();
        assert_eq!(m.insert(2, "a"), None);
        assert_eq!(m.insert(u32::MAX, "parked"), None);
        assert_eq!(m.insert(7, "b"), None);
        assert_eq!(m.insert(7, "c"), Some("b"));
        assert_eq!(m.insert(u32::MAX, "parked again"), Some("parked"));
        assert_eq!(m.get(2), Some(&"a"));
        assert_eq!(m.get(3), None, "a hole below the last handle");
        assert_eq!(m.get(100), None, "past the direct entries");
        assert_eq!(m[u32::MAX], "parked again");
        assert!(m.contains_key(7) && !m.contains_key(u32::MAX - 1));
        let all: Vec<(u32, &str)> = m.iter().map(|(k, v)| (k, *v)).collect();
        assert_eq!(all, [(2, "a"), (7, "c"), (u32::MAX, "parked again")]);
        *m.get_mut(2).unwrap() = "z";
        for v in m.values_mut() {
            if *v == "c" {
                *v = "y";
            }
        }
        assert_eq!(
            m.values().copied().collect::<Vec<_>>(),
            ["z", "y", "parked again"]
        );
        assert_eq!(m.remove(u32::MAX), Some("parked again"));
        assert_eq!(m.remove(u32::MAX), None);
        assert_eq!(m.remove(2), Some("z"));
        assert!(!m.contains_key(2));
        m.clear();
        assert_eq!(m.iter().count(), 0);
    }
}
