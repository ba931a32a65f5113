// TensorBoard event files (docs/formats.md, "TensorBoard event files"), written without TensorFlow
// or libprotobuf: events.out.tfevents.<unix secs>.<host>.<pid>.<n> in the run directory,
// TFRecord-framed (u64 length, masked CRC32C of the length, payload, masked CRC32C of the payload)
// Event protobufs: first {wall_time, file_version "brain.Event:2"}, then one Event per step whose
// Summary holds each metric as a simple_value. The reader half parses such files back with every
// length and CRC check, for tests and for `grpo runs`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::run {

// CRC32C (Castagnoli, reflected 0x82F63B78) and TFRecord's mask ((crc >> 15 | crc << 17) + 0xa282ead8).
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
uint32_t masked_crc32c(const void* data, size_t size);

// One Event message's bytes (protobuf wire format).
std::string encode_file_version_event(double wall_time, const std::string& version = "brain.Event:2");
std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::vector<std::pair<std::string, float>>& values);
// TFRecord framing of one payload.
std::string frame_record(const std::string& payload);

class TensorBoardWriter {
public:
  // Nothing is created until the first write (a run that never logs leaves no file).
  explicit TensorBoardWriter(std::string log_dir);
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Appends one Event for `step` holding every finite value of `metrics` (tag = key). Each
  // record is written with one write(2) on an O_APPEND descriptor, so a reader sees whole records.
  void add_scalars(int64_t step, double wall_time, const std::map<std::string, double>& metrics);
  // The same from a metrics record of a run: {"step":..,"time":..,<metric>:number,...}; non-numbers
  // (verdict strings, nulls) and the bookkeeping keys step/time are skipped.
  void add_metrics_record(const nlohmann::json& record);
  // add_metrics_record for the training loops: event files are a convenience beside
  // the run's metrics file, so a failure logs one warning and turns the writer off instead of throwing.
  void log_metrics(const nlohmann::json& record) noexcept;
  const std::string& path() const { return path_; }  // "" before the first write

private:
  void open();
  void append(const std::string& record);
  std::string dir_, path_;
  bool failed_ = false;
};

// ---- reading back ----
struct TfEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;                           // set on the first event only
  std::vector<std::pair<std::string, float>> values;  // Summary simple values, in file order
};
// Every record payload of a TFRecord file; throws grpo::Error naming the file, the record index
// and the byte offset on a truncated record or a length/payload CRC mismatch.
std::vector<std::string> read_tfrecords(const std::string& path);
// Decodes an Event payload (unknown fields skipped as protobuf says); throws on malformed bytes.
TfEvent decode_event(const std::string& payload, const std::string& context);
// The event files of a directory (events.out.tfevents.*), sorted by name.
std::vector<std::string> event_files(const std::string& dir);

}  // namespace grpo::run
