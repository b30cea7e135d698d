#pragma once
// removeTree: `rm -rf` for the directories the agent removes after each job (its job and scratch
// directories, a session's SSH directory), where the job's owner may have left anything: symlinks,
// a tree thousands of levels deep, millions of entries.
//
//  - Never follows a symlink. Each directory is opened with O_NOFOLLOW relative to its parent's
//    descriptor and its entries are removed with unlinkat() on that descriptor, so a directory
//    renamed or swapped for a symlink meanwhile cannot point the removal anywhere else.
//  - Holds at most kMaxDepth directories open, whatever the depth: a subtree below that is moved
//    (renameat2, RENAME_NOREPLACE, within the tree) up to the top directory and removed from there.
//    std::filesystem::remove_all holds one per level, so a deep enough tree ran the agent out of
//    descriptors while it removed it.
//  - Iterative: the agent's stack does not grow with the tree.
//  - A directory's entries come with their type (getdents64's d_type): no stat per entry, and no
//    unlink tried on a directory first; a directory whose entries all came in one read is removed
//    without another read to find its end. For a job's directories that is 25 system calls
//    against std::filesystem::remove_all's 46 (docs/benchmarks.md, section 2c).
//
// Returns 0 once path is gone (also when it never existed), else the errno of the first failure;
// what was not removed by then stays. A path that is a symlink or a file is unlinked itself.

#include <string>

namespace allot::agent {

int removeTree(const std::string& path);

// How many directories removeTree() holds open at most.
inline constexpr size_t kRemoveTreeMaxDepth = 64;

}  // namespace allot::agent
