// SIGBUS from file mappings as error values, not a death.
//
// A file ferry maps can change under it: another process truncates or rewrites a checkpoint that
// `run` reads, or the disk fills while a writer stores through a mapping. Touching a page that no
// longer has file behind it raises SIGBUS on the touching thread. Two tools turn that into an
// error:
//
// - Guarded access, for readers: guarded_copy() and guarded_read() run the access with a jump
//   buffer armed for the calling thread only (thread-local: any number of threads may be inside
//   guards at once, each catching its own faults, and guards nest). SIGBUS on that thread jumps
//   back out of the access, which returns an io error naming the file, "changed or truncated while
//   in use". The access is abandoned mid-way, so it must own nothing with a destructor, allocate
//   nothing and hold no lock: a memcpy, or a scan of bytes into plain counters.
// - Absorbed regions, for writers whose code cannot be abandoned (fills that start threads):
//   while an AbsorbedRegion is alive, SIGBUS on one of its pages maps anonymous memory over that
//   page, so the faulting store lands harmlessly, and the region counts the fault. The writer
//   then throws its output away and reports the failure.
//
// A SIGBUS outside both (a real crash) gets the disposition that was in place before, normally
// the default: the process dies with a core dump, as it would without ferry's handler.
//
// What this cannot cover:
// - Reads by the GPU. Bytes that the copy engine reads by DMA from a mapping registered with
//   cudaHostRegister are not read by any CPU instruction, so a truncation raises no signal: the
//   registration pins the pages, and the DMA goes on reading pages the file no longer holds (the
//   old bytes, or zeros in pages the writer had not yet filled). Only
//   MappedFile::check_unchanged() after such a copy completes can notice.
// - A rewrite in place that keeps the size: no fault at all, and the bytes read may mix the old
//   and the new file. check_unchanged() (modification time, and the read lease where the kernel
//   grants one) catches it; check after copying and before trusting the copy.
// - Accesses outside a guard (code that reads the mapping directly).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/status.h"
#include "format/mapped_file.h"

namespace ferry {

// Runs fn(ctx) on the calling thread with SIGBUS caught. Returns the faulting address if fn was
// abandoned because of one, nullopt if it ran to the end. See the rules for fn above.
std::optional<const void*> run_guarded(void (*fn)(void*), void* ctx);

// The same for a callable taken by reference (a lambda whose captures are references or plain
// values; it must not create objects with destructors).
template <class F>
std::optional<const void*> run_guarded(F& fn) {
  return run_guarded([](void* p) { (*static_cast<F*>(p))(); }, &fn);
}

// The error for a fault at `address` while reading `file`: "PATH: changed or truncated while in
// use (the read at byte N faulted; the file now has M bytes)".
Error mapped_fault_error(const MappedFile& file, const void* address);

// memcpy(dst, src, bytes) where src lies in `file`'s mapping; a SIGBUS is an io error naming the
// file. dst must be ordinary memory (a host or page-locked buffer).
Status guarded_copy(void* dst, const void* src, size_t bytes, const MappedFile& file);

// fn() (reads of `file`'s bytes into plain state) with a SIGBUS turned into an error naming it.
template <class F>
Status guarded_read(const MappedFile& file, F& fn) {
  const std::optional<const void*> fault = run_guarded(fn);
  if (fault) return mapped_fault_error(file, *fault);
  return {};
}

// While alive, SIGBUS on a page of [data, data + bytes) is absorbed and counted (see above).
// Move-only. At most 64 regions are live at once; past that armed() is false.
class AbsorbedRegion {
 public:
  AbsorbedRegion(void* data, size_t bytes);
  ~AbsorbedRegion();
  AbsorbedRegion(const AbsorbedRegion&) = delete;
  AbsorbedRegion& operator=(const AbsorbedRegion&) = delete;

  bool armed() const { return slot_ >= 0; }
  // Pages whose store faulted (their bytes never reached the file).
  int faults() const;

 private:
  int slot_ = -1;
};

}  // namespace ferry
