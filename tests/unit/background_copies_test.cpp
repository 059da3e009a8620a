// BackgroundCopies: copies keep running until stopped, the buffers come from the budget, and a
// buffer that does not fit is an error, not an abort.
#include "measure/background_copies.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "backend/cpu/cpu_backend.h"

namespace ferry {
namespace {

TEST(BackgroundCopies, RunUntilStoppedAndFitTheBudget) {
  auto backend = create_cpu_backend(CpuBackendOptions{});
  ASSERT_TRUE(backend->reserve(8u << 20).ok());
  auto copies = BackgroundCopies::start(*backend, 1u << 20);
  ASSERT_TRUE(copies.ok()) << copies.error().message;
  EXPECT_EQ(backend->ledger().in_use, uint64_t{1} << 20);
  // Copies are enqueued back to back until stop(): a few have run after 50 ms.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const int64_t ran = (*copies)->stop();
  EXPECT_GT(ran, 2);
  EXPECT_EQ((*copies)->stop(), ran);  // stopping again changes nothing
  copies->reset();
  EXPECT_EQ(backend->ledger().in_use, 0u);
  // More than the reservation holds: out of memory.
  auto too_big = BackgroundCopies::start(*backend, 16u << 20);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.error().code, ErrorCode::out_of_memory);
  EXPECT_FALSE(BackgroundCopies::start(*backend, 0).ok());
}

}  // namespace
}  // namespace ferry
