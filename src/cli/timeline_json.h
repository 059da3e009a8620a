// One inference's timeline (plan/stream_timeline.h) as JSON, the same in `bench --timeline-out`
// (one inference, "format": "ferry-timeline") and `profile --timeline-out` (every timed run,
// "format": "ferry-timelines"); scripts/timeline_gaps.py reads both.
#pragma once

#include <nlohmann/json.hpp>

#include "model/weights.h"
#include "plan/stream_timeline.h"

namespace ferry {

// What the times count from.
inline constexpr const char* kTimelineOrigin =
    "seconds from an event recorded on the compute stream before the inputs and the first copy";

// {"inputs_end": s, "calls": [{"phase", "step", "group", "start", "end"} and, for a streamed
// call, "copy_start", "copy_end", "copy_bytes"], in seconds from the origin.
nlohmann::ordered_json timeline_json(const StreamTimeline& t, const ModelWeights& weights);

}  // namespace ferry
