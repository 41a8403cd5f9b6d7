// Which transformer layers each pipeline stage and model chunk holds: Megatron-core's placement
// (transformer_block.py get_num_layers_to_build, transformer_layer.py
// get_transformer_layer_offset), even or with uneven first and last stages
// (--decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers), or with the embedding
// and the loss counted as a layer each (--account-for-embedding-in-pipeline-split,
// --account-for-loss-in-pipeline-split).
#pragma once
#include <string>
#include <vector>

namespace ptdp {

struct LayerSplit {
  int layers = 1;  // transformer layers in the model
  int p = 1;       // pipeline stages
  int v = 1;       // model chunks per stage (interleaved schedule)
  int first = 0;   // layers of stage 0 (over its v chunks); 0: an even share
  int last = 0;    // layers of stage p-1; 0: an even share
  // The embedding (loss) takes a layer's place: the L + 1 (+ 1) "layers" split evenly over the
  // p*v chunks, and the first chunk of stage 0 (last chunk of stage p-1) builds one layer fewer.
  bool embedding = false, loss = false;
  // Or Megatron-core's --pipeline-model-parallel-layout: the transformer layers of each virtual
  // stage i (stage i % p, chunk i / p), p*v of them; empty: not given.
  std::vector<int> chunks = {};
  bool uneven() const { return first > 0 || last > 0 || embedding || loss || !chunks.empty(); }
};

struct LayerRange {
  int begin, end;  // [begin, end)
  int size() const { return end - begin; }
  bool operator==(const LayerRange&) const = default;
};

// Empty when the split is valid; else why not, naming the flags. Every chunk holds at least one
// layer, but the first (last) may hold only the embedding (the loss) where it is counted or laid out; the layers left after the first and last stages divide evenly over the others; each
// stage's layers divide by v. With the embedding or the loss counted, L + 1 (+ 1) divides by p*v
// and first/last are not given (Megatron-core refuses both at once).
std::string layer_split_error(const LayerSplit& s);

// Stage `stage`'s layers in all (v chunks), and chunk `chunk`'s range. Chunk j of stage r holds
// the layers after those of chunks < j of every stage and of chunk j of stages < r (even: layers
// j*(L/v) + r*(L/(p*v)) ..., Megatron's placement; with the embedding counted, one fewer before
// every chunk but the first). Needs a valid split.
int stage_layer_count(const LayerSplit& s, int stage);
LayerRange chunk_layers(const LayerSplit& s, int stage, int chunk);
// "7 | 8 x 10 | 7": the stages' layers, first | middle x count | last; empty when even.
std::string describe_stages(const LayerSplit& s);

// --pipeline-model-parallel-layout as Megatron-core reads it (pipeline_parallel_layer_layout.py:
// commas dropped, "(...)*n" then "x*n" unrolled, '|' between virtual stages; E embedding, t a
// transformer layer, L loss): the transformer layers of each virtual stage. A UsageError naming
// the flag where Megatron-core refuses the layout (stages not a multiple of p, E not first or L
// not last or either not once, t not --layers times) and where ptdp cannot run it: MTP layers (m),
// an empty virtual stage, E outside the first or L outside the last. The first (last) virtual stage
// may hold only the embedding (the loss): a chunk of no transformer layer.
std::vector<int> parse_pipeline_layout(const std::string& layout, int p, int layers);
// The layout in one spelling: "E1|2|2|1L" (each virtual stage's transformer layers).
std::string canonical_layout(const std::vector<int>& chunks);

}  // namespace ptdp
