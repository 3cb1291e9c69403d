// Graph::part: some of a graph's tasks as a graph of their own (graph/graph.hpp).
#include "core/error.hpp"
#include "graph/graph.hpp"

namespace gf {

Graph::Part Graph::part(const std::vector<TaskIndex> &tasks,
                        const std::function<std::pair<const void *, uint64_t>(DataIndex)> &moved,
                        const std::function<bool(DataIndex)> &keep) const {
  Part out;
  out.graph = std::make_shared<Graph>();
  out.tasks = tasks;
  Graph &g = *out.graph;
  std::vector<TaskIndex> task_map(lists_.tasks.size(), kNoIndex);
  for (size_t i = 0; i < tasks.size(); ++i) task_map[tasks[i]] = static_cast<TaskIndex>(i);
  std::unordered_map<DataIndex, DataIndex> data_map;
  auto add = [&](DataIndex d, DataDesc desc) {
    desc.producer = kNoIndex;
    desc.consumer_slots = 0;
    g.lists_.data.push_back(std::move(desc));
    out.data.push_back(d);
    const auto index = static_cast<DataIndex>(g.lists_.data.size() - 1);
    data_map[d] = index;
    return index;
  };
  // The part's data for this graph's `d`, made on first use.
  auto data_of = [&](DataIndex d) -> DataIndex {
    if (auto it = data_map.find(d); it != data_map.end()) return it->second;
    const DataDesc &src = lists_.data[d];
    DataDesc desc = src;
    desc.host_value_destroy = nullptr;  // the original owns it
    if (src.origin == DataOrigin::kProduced && task_map[src.producer] == kNoIndex) {
      if (src.kind != DataKind::kBuffer) {
        fail(GF_ERR_INFEASIBLE, data_label(d) +
                                    " is an opaque value that would have to move between this "
                                    "process and the service, and only buffers can");
      }
      const auto [bytes, size] = moved(d);
      desc.origin = DataOrigin::kHostBuffer;
      desc.host_bytes = bytes;
      desc.size = size;
      desc.flags = 0;
      desc.literal = LiteralForm::kBytes;
    } else if (src.origin == DataOrigin::kProduced && keep(d)) {
      desc.flags |= GF_DATA_KEEP;
    }
    return add(d, std::move(desc));
  };
  for (TaskIndex t : tasks) {
    const TaskDesc &src = lists_.tasks[t];
    TaskDesc task = src;
    task.user_data_destroy = nullptr;
    const auto index = static_cast<TaskIndex>(g.lists_.tasks.size());
    task.inputs_begin = static_cast<uint32_t>(g.lists_.input_refs.size());
    for (uint32_t i = 0; i < src.input_count; ++i) {
      const DataIndex d = data_of(lists_.input_refs[src.inputs_begin + i]);
      g.lists_.input_refs.push_back(d);
      g.lists_.data[d].consumer_slots++;
    }
    task.outputs_begin = static_cast<uint32_t>(g.lists_.output_refs.size());
    for (uint32_t i = 0; i < src.output_count; ++i) {
      const DataIndex d = data_of(lists_.output_refs[src.outputs_begin + i]);
      g.lists_.output_refs.push_back(d);
      g.lists_.data[d].producer = index;
    }
    task.request = g.requests_.intern(requests_.get(src.request));
    if (src.command != UINT32_MAX) {
      task.command = static_cast<uint32_t>(g.commands_.size());
      g.commands_.push_back(std::make_unique<CommandSpec>(*commands_[src.command]));
    }
    if (src.named()) task.name_text = g.add_text(task_name(src));
    if (src.names_kernel()) {
      task.kernel_text = g.add_text(kernel_name(src));
      g.named_kernels_++;
    }
    const CostKey &key = cost_keys_[src.cost_key];
    task.cost_key = g.intern_cost_key(key.name, key.fn);
    g.push_task(task);
  }
  g.part_of_ = std::make_unique<PartOf>(PartOf{out.tasks, out.data});
  for (const auto &[t, before] : lists_.edges) {
    if (task_map[t] != kNoIndex && task_map[before] != kNoIndex) {
      g.lists_.edges.emplace_back(task_map[t], task_map[before]);
    }
  }
  return out;
}

}  // namespace gf
