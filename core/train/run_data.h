// The samples of a training run (--data, --data-order, --split, --eval-iters): what it trains on,
// the valid split its evaluations read and the test split evaluated once after training.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/comm/communicator.h"
#include "core/config/run_config.h"
#include "core/data/indexed_dataset.h"
#include "core/data/samples.h"
#include "core/train/run_log.h"

namespace ptdp {

struct RunData {
  std::unique_ptr<IndexedDataset> dataset;  // --data-order ptdp over a dataset: the samples' file
  std::unique_ptr<SampleSource> train;
  std::unique_ptr<SampleSource> valid;  // --eval-iters
  std::unique_ptr<SampleSource> test;   // --eval-iters, Megatron order, where the test split holds documents
  std::string sources;  // the result row's: SAMPLES:EPOCHS drawn of each dataset, in --data's order
};

// This rank's samples, in rank phases of `launched` (core/train/rank_phase.h): a file that does
// not open or a bad list ends every rank with its cause. With the Megatron order world rank 0
// (`rank0`) builds the index files first and the others then find them in the cache (or build
// their own where the cache directory is not shared). `log`: world rank 0's, or null.
// Processes (MPI) also compare the content of each dataset they read (require_same_data).
RunData set_up_run_data(const RunConfig& c, Communicator& launched, bool rank0, RunLog* log);

// The ranks of `world` read the same data (a collective): `digests` holds each dataset prefix of
// --data and its content digest (dataset_content_digest, core/data/dataset_digest.h). A copy that
// differs on some node (the same size, other content) ends every rank with an AgreedError (usage)
// naming the dataset, rank 0's digest and the first rank that differs.
void require_same_data(Communicator& world, const std::vector<std::pair<std::string, std::string>>& digests);

}  // namespace ptdp
