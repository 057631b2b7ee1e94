//! A cursor's place across writes: saving it by content, finding it again, and the marks
//! LMDB leaves after deletes and appends.

use crate::btree::State;
use crate::error::{Error, Result};
use crate::format::meta::DbRecord;
use crate::store::PageSource;

use super::*;

impl CursorCore {
    /// Remembers where the cursor stands by content (key, and value in a DUPSORT DB), so
    /// that [`CursorCore::restore_place`] can find the place again after the tree changed
    /// under the cursor (another cursor of the same write txn wrote). `into` is reused.
    pub fn save_place<S: PageSource + ?Sized>(&self, src: &S, into: &mut SavedPlace) -> Result<()> {
        into.key.clear();
        into.value.clear();
        into.marks = [
            self.main_past,
            self.eof,
            self.del,
            self.x_past,
            self.x_eof,
            self.x_del,
        ];
        into.valid = self.pos.state == State::Valid;
        if !into.valid || self.main_past {
            return Ok(());
        }
        let (node, leaf) = self.pos.node(src)?;
        into.key.extend_from_slice(node.key);
        if let Some(dup) = &self.dup {
            if !self.x_past {
                into.value
                    .extend_from_slice(dup_value(src, dup, &node, leaf)?);
            }
        }
        Ok(())
    }

    /// Stands where `saved` was taken, in the tree `db` as it is now. Where the item is gone
    /// (another cursor deleted it), the cursor stands as if it had deleted it itself: on
    /// what followed, marked deleted, as LMDB's cursor fix-ups leave it.
    pub fn restore_place<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        db: DbRecord,
        saved: &SavedPlace,
    ) -> Result<()> {
        self.db = db;
        let [main_past, eof, del, x_past, x_eof, x_del] = saved.marks;
        if !saved.valid {
            self.pos.state = State::Unset;
            self.dup = None;
            (self.main_past, self.eof, self.del) = (main_past, eof, del);
            (self.x_past, self.x_eof, self.x_del) = (x_past, x_eof, x_del);
            return Ok(());
        }
        if main_past {
            if self.last_inner(src)? {
                self.main_past = true;
                self.dup = None;
                (self.eof, self.del) = (eof, del);
            }
            return Ok(());
        }
        if !self.seek_inner(src, &saved.key, true)? {
            return self.reposition_after_foreign_delete(src, db, &saved.key, None);
        }
        if let Some(dcmp) = self.dcmp {
            if x_past {
                self.enter(src, true)?;
            } else if !self.seek_value(src, dcmp, &saved.value, true)? {
                return self.reposition_after_foreign_delete(
                    src,
                    db,
                    &saved.key,
                    Some(&saved.value),
                );
            }
        }
        (self.main_past, self.eof, self.del) = (false, eof, del);
        (self.x_past, self.x_eof, self.x_del) = (x_past, x_eof, x_del);
        Ok(())
    }

    /// After another handle deleted the item under this cursor: as
    /// [`CursorCore::reposition_after_delete`], except that if the delete emptied the DB
    /// the cursor, unpositioned, keeps the "deleted here" mark (as LMDB's rebalance leaves
    /// it), so that its next move answers NOTFOUND where an unpositioned cursor's would
    /// start from the first or last item (see `next_op`). The deleting cursor itself gets
    /// no mark.
    fn reposition_after_foreign_delete<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        db: DbRecord,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<()> {
        self.reposition_after_delete(src, db, key, value)?;
        if !self.is_positioned() {
            self.del = true;
        }
        Ok(())
    }

    /// After a put with APPEND (`main`) or APPEND_DUP: LMDB found the place with its
    /// "last" move, which marks the end (C_EOF) on the main cursor or on the values cursor.
    pub fn mark_appended(&mut self, main: bool) {
        if main {
            self.eof = true;
        } else if matches!(self.dup, Some(DupPos::Sub { .. } | DupPos::Tree { .. })) {
            self.x_eof = true;
        }
    }

    /// The main cursor's "deleted here" mark (LMDB's C_DEL).
    pub fn deleted_mark(&self) -> bool {
        self.del
    }

    /// Sets the main cursor's "deleted here" mark back (a refused put keeps it in LMDB).
    pub fn set_deleted_mark(&mut self, on: bool) {
        self.del = on;
    }

    /// Ends a `mdb_cursor_get` call, whatever its result: LMDB clears the main cursor's
    /// "deleted here" mark at the end of every call, failed ones included.
    pub fn end_get(&mut self) {
        self.del = false;
    }

    /// `MDB_GET_CURRENT`: ends the "deleted here" marks of both cursors, as in LMDB, or
    /// `InvalidArgument` (LMDB's EINVAL) on a cursor that is not positioned.
    pub fn current_op(&mut self) -> Result<()> {
        if !self.is_positioned() {
            return Err(Error::InvalidArgument("cursor is not positioned"));
        }
        self.del = false;
        self.x_del = false;
        Ok(())
    }

    /// After the item (`key`, `value`) was deleted through this cursor (`value` None: the
    /// whole key), stand where LMDB's cursor stands: on what followed, marked deleted.
    pub fn reposition_after_delete<S: PageSource + ?Sized>(
        &mut self,
        src: &S,
        db: DbRecord,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<()> {
        self.db = db;
        self.eof = false;
        self.main_past = false;
        let key_remains = self.seek_inner(src, key, true)?;
        if key_remains {
            // One value of a key that keeps others: the values cursor stands on the value
            // that followed, or one past the last value.
            let v = value.expect("a remaining key means one value was deleted");
            let dcmp = self.dcmp.expect("values only in DUPSORT DBs");
            self.x_eof = false;
            if !self.seek_value(src, dcmp, v, false)? {
                self.enter(src, true)?;
                self.x_past = true;
                self.x_eof = true;
            }
            self.x_del = true;
            return Ok(());
        }
        // The key's node is gone: the main cursor stands on the next node, marked.
        if self.seek_inner(src, key, false)? {
            self.del = true;
            self.x_del = true;
            return Ok(());
        }
        if self.last_inner(src)? {
            self.main_past = true;
            self.eof = true;
            self.del = true;
            self.dup = None;
        }
        Ok(())
    }
}

/// A cursor's place by content: see [`CursorCore::save_place`].
#[derive(Clone, Debug, Default)]
pub struct SavedPlace {
    valid: bool,
    key: Vec<u8>,
    value: Vec<u8>,
    /// main_past, eof, del, x_past, x_eof, x_del.
    marks: [bool; 6],
}
