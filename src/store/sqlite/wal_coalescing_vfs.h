#pragma once
// A SQLite VFS that writes a commit's WAL frames to the file in one write, not two a frame.
//
// SQLite writes each WAL frame as two writes, its 24-byte header and its page, so a group commit
// of 28 frames was 56 `pwrite`s before its `fdatasync`. On this project's virtual machines a
// system call costs several microseconds, and those writes were most of the store writer's system
// time. This VFS wraps SQLite's own ("unix", or the one given) and, for WAL files only, keeps
// writes that continue one another in memory until something needs them in the file: a sync, a
// read, a size, a truncation, a file control, a close, a write elsewhere, or kCoalescedWriteBytes
// of them. Then it writes them in order, as one write. What is still pending when SQLite releases
// the WAL's write lock, or closes the WAL, belongs to a transaction that was rolled back, and is
// dropped unwritten. Every other file and call goes straight through.
//
// Why it is safe only where every commit syncs the WAL (`PRAGMA synchronous = FULL` or EXTRA):
// another connection reads a frame from the file once the WAL's index says it is there, and SQLite
// writes the index after a commit's sync (sqlite3WalFrames), which is when the frames reach the
// file here. With synchronous = NORMAL a commit does not sync, so a reader could be sent to a
// frame still in this connection's memory; the index is in shared memory, whose locks and
// barriers are the database file's, so nothing here could see it change. Nothing is durable
// before the sync either way, so a crash loses nothing that SQLite had promised: recovery keeps
// the frames up to the last commit whose checksums hold, as it always does. A WAL without
// power-safe overwrite is not coalesced (vfsOpen says why), nor is any database file.

#include <sqlite3.h>

#include <cstdint>

namespace allot::store::sqlite {

// The name of the coalescing VFS over SQLite's default VFS, registered (not as the default) on
// the first call; pass it to sqlite3_open_v2. Thread-safe.
const char* walCoalescingVfsName();

// Registers a coalescing VFS named `name` over `underlying` (which must outlive it) and returns
// SQLITE_OK or SQLite's error. For tests, which count what reaches the underlying VFS.
int registerWalCoalescingVfs(const char* name, sqlite3_vfs* underlying);

// How much a WAL's writes may hold in memory before they are written: 30 frames of 4 KiB
// pages, a group commit of about 18 job submissions. Under 128 KiB, for SQLite's unix VFS writes
// only the low 17 bits of a larger size in one call (seekAndWriteFd) and takes a short write for
// a full disk.
constexpr int64_t kCoalescedWriteBytes = 124 * 1024;

}  // namespace allot::store::sqlite
