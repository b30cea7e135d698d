#pragma once
// removeTree: `rm -rf` for the directories the agent removes after each job (its job and scratch
// directories, a session's SSH directory), where the job's owner may have left anything: symlinks,
// a tree thousands of levels deep, millions of entries.
//
//  - Never follows a symlink. Each directory is opened with O_NOFOLLOW relative to its parent's
//    descriptor and its entries are removed with unlinkat() on that descriptor, so a directory
//    renamed or swapped for a symlink meanwhile cannot point the removal anywhere else.
//  - Holds at most kRemoveTreeMaxDepth directories open, whatever the depth: a subtree below that
//    is moved (renameat2, RENAME_NOREPLACE) up into the top directory, under a random name the
//    tree's owner cannot have taken already, and removed from there. std::filesystem::remove_all
//    holds one per level, so a deep enough tree ran the agent out of descriptors while it removed
//    it.
//  - Never seeks back in a directory: what was read and not yet dealt with when a subdirectory is
//    opened is kept (tmpfs before Linux 6.6 counts offsets in entries still there, so seeking back
//    to one after removing entries skipped as many).
//  - Iterative: the agent's stack does not grow with the tree.
//  - A directory's entries come with their type (getdents64's d_type): no stat per entry, and no
//    unlink tried on a directory first; a directory whose entries all came in one read is removed
//    without another read to find its end. For a job's directories that is 25 system calls
//    against std::filesystem::remove_all's 46 (docs/benchmarks.md, section 2c).
//
// Returns 0 once path is gone (also when it never existed), else the errno of the first failure;
// what was not removed by then stays. A path that is a symlink or a file is unlinked itself.
// path itself is opened, and at the end removed, by its path: its parent must be a directory no
// one but the agent may write (the work, scratch and state roots are).
//
// What it does not guard against (nor did remove_all): the tree's owner moving into it, from a
// directory it may write on the same file system, a directory holding what it could not delete
// itself; the agent, as root, then deletes that too.

#include <cstddef>
#include <string>

namespace allot::agent {

int removeTree(const std::string& path);

// removeTree, stopping with EINPROGRESS once it has removed maxEntries entries (files and
// directories; a subtree hoisted counts as one): what was removed by then stays removed, the rest
// is still at path. So a caller that may not wait (the agent's loop) bounds its time, and calls
// again to go on; each call with maxEntries >= 1 makes progress. TreeRemover (tree_remover.h)
// is built on it.
int removeTreeWithin(const std::string& path, size_t maxEntries);

// What names an entry renamed aside to be removed starts with.
inline constexpr const char* kAsidePrefix = ".allot-removing-";

// Renames fromDir/name into toDir as kAsidePrefix and a random number (RENAME_NOREPLACE): a name
// nobody who may write toDir can have taken or guessed. 0, with *given (when not null) the new
// name; ENOENT when name is gone; else an errno.
int renameAside(int fromDir, const std::string& name, int toDir, std::string* given);

// How many directories removeTree() holds open at most.
inline constexpr size_t kRemoveTreeMaxDepth = 64;

}  // namespace allot::agent
