// Writes that never leave a half-written file or folder where a reader looks: a full disk,
// SIGINT/SIGTERM (core/interrupt.h), a crash or a second writer leaves either the old contents
// intact or the new ones complete.
//
// - AtomicFile: one file (a plan, a profile, an .npy dump, a shard). The bytes go to a temporary
//   ".NAME.ferry-tmp.PID.N" beside the target; commit() flushes it to the disk (fsync), renames it
//   over the target (a reader sees the old file or the new one, never a mix) and flushes the
//   folder. Dropped without commit, it removes the temporary. Two writers of one file each write
//   their own temporary: the last rename wins and both results are complete.
// - StagedFolder: a whole folder (a checkpoint: config.json, shards, index). The new folder is
//   written beside the old one (".NAME.ferry-new.PID" in the same parent) and commit() swaps the
//   two in one atomic rename (renameat2 RENAME_EXCHANGE; two renames where the file system lacks
//   it, with the old folder restored by the next writer if a crash falls between them). Files of
//   the old folder that the new one does not supersede (a tokenizer, a README) are carried over by
//   hard link. Writers of one folder take turns: each holds an advisory lock (flock) on the
//   folder that is at the target name while it works.
// - FileLock: that advisory lock, on any file or folder, waiting in a loop an interrupt can end.
//
// Temporaries are recognised by their names and the PID in them: when the next writer of the
// same target starts, those of writers that are no longer running are removed.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ferry {

class AtomicFile {
 public:
  // Creates the temporary beside `path` (whose folder must exist).
  static Result<AtomicFile> create(const std::string& path, mode_t mode = 0644);

  AtomicFile() = default;
  AtomicFile(AtomicFile&& o) noexcept;
  AtomicFile& operator=(AtomicFile&& o) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  int fd() const { return fd_; }  // open read-write (a writer may map it)
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }

  // Appends all of `bytes` (a full disk is an error naming the file and the cause).
  Status write(const void* data, size_t bytes);
  // fsync, close, rename over the target, fsync of the folder. An interrupt pending before the
  // rename abandons the write instead (the target is left as it was).
  Status commit();

 private:
  void discard();

  int fd_ = -1;
  bool committed_ = false;
  std::string path_;
  std::string temp_;
};

// `bytes` to `path` through an AtomicFile.
Status write_file_atomic(const std::string& path, std::string_view bytes, mode_t mode = 0644);

class FileLock {
 public:
  // flock(LOCK_EX) on `path`. When another process holds it, calls on_wait once and waits,
  // polling, until it is free or an interrupt is pending (then an `interrupted` error).
  static Result<FileLock> acquire(const std::string& path,
                                  const std::function<void()>& on_wait = {});

  FileLock() = default;
  FileLock(FileLock&& o) noexcept;
  FileLock& operator=(FileLock&& o) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// What a StagedFolder may replace, and what it must leave alone.
struct FolderPolicy {
  // Replace a folder that already holds files (else only an empty or missing one).
  bool force = false;
  // Names the new folder supersedes: not carried over from the old one.
  std::function<bool(const std::string&)> supersedes;
  // With force, the old folder must hold an entry this accepts (it is the kind of folder the
  // writer makes), else it is refused. Empty: any folder.
  std::function<bool(const std::string&)> marks_kind;
  // Temporaries of other writers (an older ferry's "model.safetensors.tmp"): dropped, and not
  // counted as contents. AtomicFile's own temporaries are recognised without this.
  std::function<bool(const std::string&)> leftover;
  std::string kind = "folder";  // "checkpoint": for messages
  std::string marks = "";       // "config.json, model.safetensors": for messages
  std::string force_flag = "--force";
};

class StagedFolder {
 public:
  // Locks `target` (creating it if missing), removes what crashed writers left, checks the old
  // contents against the policy, and creates the empty staging folder.
  static Result<StagedFolder> begin(const std::string& target, const FolderPolicy& policy,
                                    const std::function<void()>& on_wait = {});

  StagedFolder() = default;
  StagedFolder(StagedFolder&& o) noexcept;
  StagedFolder& operator=(StagedFolder&& o) noexcept;
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;
  ~StagedFolder();  // without commit: the staging folder is removed, the target left as it was

  const std::string& path() const { return staging_; }  // write the new contents here
  const std::string& target() const { return target_; }

  // Carries the old folder's other files over, flushes, swaps the folders and removes the old
  // one. An interrupt pending before the swap abandons it (the target is left as it was).
  Status commit();

  // An error of a writer into path(), said in terms of the target: the staging folder is named
  // "TARGET (new)", and the message ends by saying that the target was left as it was.
  Error explain(const Error& error) const;

 private:
  void discard();

  std::string target_;
  std::string staging_;
  std::vector<std::string> carry_;  // entries of the old folder to keep
  FileLock target_lock_;
  FileLock staging_lock_;
  bool created_target_ = false;
  bool committed_ = false;
};

// fsync of a folder (its entries); file systems that cannot are not an error.
Status fsync_folder(const std::string& dir);

}  // namespace ferry
