//! Freeing a whole tree: every page it reaches goes back to the store.

use crate::error::{Error, Result};
use crate::format::meta::DbRecord;
use crate::format::page::{node_flags, OverflowView, P_INVALID};
use crate::store::PageStore;

use super::MAX_DEPTH;

/// Frees every page of the tree `rec`: its branch and leaf pages, the overflow runs of
/// its values, and the trees hanging off its nodes (DUPSORT sub-DBs, and named DBs when
/// `rec` is the main DB). Used to delete a sub-DB and to drop a DB.
pub fn free_tree<S: PageStore>(store: &mut S, rec: &DbRecord) -> Result<()> {
    if rec.root == P_INVALID {
        return Ok(());
    }
    let mut stack = vec![(rec.root, 1usize)];
    let mut subtrees = Vec::new();
    while let Some((pgno, level)) = stack.pop() {
        if level > MAX_DEPTH {
            return Err(Error::corrupted(pgno, "tree deeper than the maximum"));
        }
        let page = super::view(&*store, pgno)?;
        let mut runs = Vec::new();
        for i in 0..page.num_keys() {
            if page.is_branch() {
                stack.push((page.child(i)?, level + 1));
                continue;
            }
            let node = page.node(i)?;
            if node.flags & node_flags::BIGDATA != 0 {
                runs.push(node.overflow_pgno());
            } else if node.flags & node_flags::SUBDATA != 0 && node.data.len() == DbRecord::SIZE {
                subtrees.push(DbRecord::decode(node.data));
            }
        }
        for run in runs {
            let count = OverflowView::parse(store.page(run)?, run)?.pages;
            // A forged count must not free pages past the file (or billions of them).
            if store.pages(run, count).is_err() {
                return Err(Error::corrupted(run, "overflow run length out of range"));
            }
            store.free(run, count)?;
        }
        store.free(pgno, 1)?;
    }
    for sub in subtrees {
        free_tree(store, &sub)?;
    }
    Ok(())
}
