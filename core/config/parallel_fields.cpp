// ParallelConfig's fields: the layout over tensor, pipeline and data parallelism, the batch and
// the schedule. (layout_chunks is read from pipeline_model_parallel_layout, not a field.)
#include "core/config/config_fields.h"

namespace ptdp {

namespace {
// The placement flags are in the key through the one column that spells the placement.
constexpr const char* kInStageLayers = "in the key as the column stage_layers, the placement in one spelling";

// Context parallelism's size and how its groups exchange keys and values.
void add_context_parallel_fields(std::vector<Field>& v, FieldGroup g) {
  v.push_back(Field(PTDP_MEMBER(par.cp), "cp", g)
                  .flags("--cp,--context-parallel-size")
                  .help("context-parallel size c: each sequence cut into 2c chunks, rank i of a context-parallel "
                        "group holding chunks i and 2c-1-i (Megatron-core's causal load balancing)")
                  .positive()
                  .at_most(4096)
                  .column()
                  .key("1")
                  .in_specs()
                  .checkpoint({}, "--context-parallel-size"));
  v.push_back(Field(PTDP_MEMBER(par.cp_comm), "cp_comm_type", g)
                  .flags("--cp-comm-type")
                  .help(enum_choices<CpComm>(true) +
                        ": how a context-parallel group exchanges keys and values (a ring of blocks, heads for "
                        "sequence, or all of them gathered)")
                  .column()
                  .key("p2p")
                  .in_specs());
}

}  // namespace

const std::vector<Field>& parallel_fields() {
  static const std::vector<Field> fields = [] {
    const FieldGroup g = FieldGroup::Parallel;
    std::vector<Field> v;
    v.push_back(Field(PTDP_MEMBER(par.tp), "tp", g)
                    .flags("--tp,--tensor-model-parallel-size")
                    .help("tensor-parallel size t")
                    .positive()
                    .at_most(4096)
                    .column()
                    .key()
                    .in_specs()
                    .checkpoint());
    v.push_back(Field(PTDP_MEMBER(par.pp), "pp", g)
                    .flags("--pp,--pipeline-model-parallel-size")
                    .help("pipeline-parallel size p")
                    .positive()
                    .at_most(4096)
                    .column()
                    .key()
                    .in_specs()
                    .checkpoint());
    add_context_parallel_fields(v, g);
    v.push_back(Field(PTDP_MEMBER(par.dp), "dp", g)
                    .flags("--dp")
                    .help("data-parallel size d (default: ranks / (t*p))")
                    .no_default_in_help()
                    .rule({.lo = 0.0, .must = "must be positive"})
                    .at_most(4096)
                    .column()
                    .key()
                    .in_specs()
                    .checkpoint([](const RunConfig& c) {  // what lays out the sharded optimizer state
                      return c.par.zero > 0 ? std::optional(std::to_string(c.par.dp)) : std::nullopt;
                    }));
    v.push_back(Field(PTDP_MEMBER(par.vpp), "vpp", g)
                    .flags("--vpp,--virtual-pipeline-model-parallel-size,--num-virtual-stages-per-pipeline-rank")
                    .help("model chunks per stage v (interleaved schedule)")
                    .positive()
                    .at_most(4096)
                    .column()
                    .key()
                    .in_specs()
                    .checkpoint());
    v.push_back(Field(PTDP_MEMBER(par.first_stage_layers), "first_stage_layers", g)
                    .flags("--decoder-first-pipeline-num-layers")
                    .help("layers of the first pipeline stage (Megatron-core's uneven stages; default: an even share)")
                    .no_default_in_help()
                    .not_key(kInStageLayers)
                    .in_specs());
    v.push_back(Field(PTDP_MEMBER(par.last_stage_layers), "last_stage_layers", g)
                    .flags("--decoder-last-pipeline-num-layers")
                    .help("layers of the last pipeline stage (default: an even share); the other stages share the "
                          "rest evenly")
                    .no_default_in_help()
                    .not_key(kInStageLayers)
                    .in_specs());
    v.push_back(Field(PTDP_MEMBER(par.embedding_in_split), "account_for_embedding_in_pipeline_split", g)
                    .flags("--account-for-embedding-in-pipeline-split")
                    .help("count the embedding as a layer when splitting layers over stages: the first chunk of stage "
                          "0 holds one transformer layer fewer (Megatron-core's flag)")
                    .not_key(kInStageLayers)
                    .in_specs());
    v.push_back(Field(PTDP_MEMBER(par.loss_in_split), "account_for_loss_in_pipeline_split", g)
                    .flags("--account-for-loss-in-pipeline-split")
                    .help("count the loss (the output layer) as a layer: the last chunk of the last stage holds one "
                          "transformer layer fewer")
                    .not_key(kInStageLayers)
                    .in_specs());
    v.push_back(Field(PTDP_MEMBER(par.pipeline_layout), "pipeline_model_parallel_layout", g)
                    .flags("--pipeline-model-parallel-layout")
                    .help("each virtual stage's layers, Megatron-core's string: E embedding, t transformer layer, L "
                          "loss, '|' between virtual stages (stage i % p, chunk i / p), \"(...)*n\" and \"t*n\" repeat; "
                          "e.g. \"Et*3|(t*4|)*6,t*3L\" (sets --vpp)")
                    .no_default_in_help()
                    .not_key(kInStageLayers)
                    .in_specs()
                    .checkpoint([](const RunConfig& c) {  // as placed, in one spelling
                      return c.par.layout_chunks.empty() ? std::string("none") : canonical_layout(c.par.layout_chunks);
                    }));
    v.push_back(Field(PTDP_MEMBER(par.micro_batch), "micro_batch", g)
                    .flags("--micro-batch,--micro-batch-size")
                    .help("micro-batch size b")
                    .positive()
                    .at_most(1 << 20)
                    .column()
                    .key()
                    .in_specs());
    v.push_back(Field(PTDP_MEMBER(par.global_batch), "global_batch", g)
                    .flags("--global-batch,--global-batch-size")
                    .help("global batch size B (default: b*d)")
                    .no_default_in_help()
                    .rule({.lo = 0.0, .must = "must be positive"})
                    .column()
                    .key()
                    .in_specs()
                    .checkpoint());
    v.push_back(Field(PTDP_MEMBER(par.schedule), "schedule", g)
                    .flags("--schedule")
                    .help(enum_choices<ScheduleKind>(true))
                    .column()
                    .key()
                    .in_specs());
    v.push_back(Field(PTDP_MEMBER(par.recompute), "recompute", g)
                    .flags("--recompute,--recompute-granularity")
                    .help("activation recomputation: none | full | selective")
                    .column()
                    .key()
                    .in_specs());
    v.push_back(Field(PTDP_MEMBER(par.recompute_activation), "recompute_activation", g)
                    .flags("--recompute-activation")
                    .help("the MLP's activation output (GeLU; LLaMA: SwiGLU) is not kept for backward but recomputed "
                          "there from its kept input, as torch.compile's min-cut partitioner does for pointwise ops: "
                          "b*s*ffn/t elements a layer fewer kept, for one pass over them (not with --recompute full, "
                          "which recomputes everything)")
                    .column()
                    .key("0")
                    .in_specs());
    v.push_back(Field(PTDP_MEMBER(par.scatter_gather), "scatter_gather", g)
                    .flags("--scatter-gather")
                    .negation("--no-scatter-gather")
                    .help("scatter/gather optimisation of pipeline sends (default on)")
                    .column()
                    .key()
                    .in_specs());
    v.push_back(Field(PTDP_MEMBER(par.sequence_parallel), "sequence_parallel", g)
                    .flags("--sequence-parallel")
                    .help("sequence parallelism (Korthikanti et al. 2022): LayerNorms, residuals and the activations "
                          "between layers and stages hold 1/t of the b*s rows per tensor-parallel rank; all-gather "
                          "before and reduce-scatter after the tensor-parallel GEMMs replace the all-reduces (needs "
                          "--tp > 1 dividing --micro-batch x --seq-length)")
                    .column()
                    .key("0")
                    .in_specs());
    v.push_back(Field(PTDP_MEMBER(par.zero), "zero", g)
                    .flags("--zero")
                    .help("sharded data parallelism: 0 none, 1 the distributed optimizer (optimizer state sharded over "
                          "d, gradients reduce-scattered), 2 ZeRO-2 (gradients sharded too, reduce-scattered after "
                          "every micro-batch; ptdp simulate and plan under --stack mcore only), 3 ZeRO-3 "
                          "(parameters sharded too; t = p = 1)")
                    .alias_flag("--use-distributed-optimizer", "1",
                                "Megatron's name for --zero 1 (the distributed optimizer)")
                    .one_of({0, 1, 2, 3}, "must be 0, 1, 2 or 3")
                    .column()
                    .key("0")
                    .in_specs()
                    .checkpoint());
    return v;
  }();
  return fields;
}

}  // namespace ptdp
