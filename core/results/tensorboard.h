// TensorBoard event files, as torch.utils.tensorboard's SummaryWriter writes them (and Megatron-LM
// through it): TFRecord framing (length, masked CRC-32C of the length, the record, its masked
// CRC-32C) around Event protobufs, the first naming the file version "brain.Event:2", then one
// Event per scalar with a Summary.Value {tag, simple_value}. TensorBoard, and Megatron's own test
// tooling (tensorboard's EventAccumulator), read them.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace ptdp {

// CRC-32C (Castagnoli) and TFRecord's mask of it.
uint32_t crc32c(std::string_view data);
uint32_t masked_crc32c(std::string_view data);

class TensorBoardWriter {
 public:
  // Creates `dir` (and its parents) when missing, and in it a new event file named as
  // SummaryWriter names them (events.out.tfevents.TIME.HOST.PID.N). UsageError naming `flag` when
  // the directory or file cannot be made.
  TensorBoardWriter(const std::string& dir, const std::string& flag);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One scalar (stored as a 32-bit float, as SummaryWriter.add_scalar does) at `step`.
  void add_scalar(std::string_view tag, double value, int64_t step);
  // Writes the events so far through to the file (readers see them at once).
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_event(const std::string& event);

  std::string path_;
  std::FILE* f_ = nullptr;
};

}  // namespace ptdp
