#include "backend/cuda/cuda_graph.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_stream.h"

namespace ferry::cuda {
namespace {

Result<UniqueGraph> capture_graph(cudaStream_t stream, const GraphExec::Body& body) {
  if (stream == nullptr) {
    return make_error(ErrorCode::invalid_argument, "graph capture needs a CUDA backend stream");
  }
  FERRY_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const Status body_status = body();
  cudaGraph_t g = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &g);
  UniqueGraph graph(g);
  if (!body_status.ok()) return body_status.error();
  FERRY_CUDA_CHECK(end);
  return graph;
}

Result<UniqueGraphExec> instantiate(const UniqueGraph& graph) {
  cudaGraphExec_t exec = nullptr;
  FERRY_CUDA_CHECK(cudaGraphInstantiate(&exec, graph.get(), 0));
  return UniqueGraphExec(exec);
}

}  // namespace

Result<GraphExec> GraphExec::capture(cudaStream_t stream, const Body& body) {
  GraphExec g;
  FERRY_ASSIGN_OR_RETURN(g.graph_, capture_graph(stream, body));
  FERRY_ASSIGN_OR_RETURN(g.exec_, instantiate(g.graph_));
  return g;
}

Result<GraphExec> GraphExec::capture(Stream& stream, const Body& body) {
  return capture(stream_handle(stream), body);
}

Status GraphExec::update(cudaStream_t stream, const Body& body) {
  FERRY_ASSIGN_OR_RETURN(UniqueGraph graph, capture_graph(stream, body));
  updated_in_place_ = false;
  if (exec_) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(exec_.get(), graph.get(), &info) == cudaSuccess) {
      updated_in_place_ = true;
    } else {
      (void)cudaGetLastError();  // a refused update is not an error: instantiate instead
    }
  }
  if (!updated_in_place_) {
    FERRY_ASSIGN_OR_RETURN(exec_, instantiate(graph));
  }
  graph_ = std::move(graph);
  return Status();
}

Status GraphExec::update(Stream& stream, const Body& body) {
  return update(stream_handle(stream), body);
}

Status GraphExec::launch(cudaStream_t stream) const {
  if (!exec_) return make_error(ErrorCode::internal, "GraphExec::launch: no graph");
  FERRY_CUDA_CHECK(cudaGraphLaunch(exec_.get(), stream));
  return Status();
}

Status GraphExec::launch(Stream& stream) const {
  return launch(stream_handle(stream));
}

}  // namespace ferry::cuda
