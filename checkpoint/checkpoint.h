#pragma once
// Distributed checkpoints (torch.distributed.checkpoint and its state_dict helpers): a state dict
// keyed by fully qualified names, independent of the parallelism; save / async_save of it to a
// directory, each rank writing the chunks it owns; load into any mesh and placements.
//
// Note [Checkpoint directory layout]
// DIR/tessera_checkpoint.json: the committed metadata (JSON). Every global tensor: dtype,
//   global shape, and its chunks (file, global offsets and sizes, byte range, XXH3-64 of the
//   chunk and of each block of it), plus the scalars. Written last, by rank 0, through a
//   temporary name, fsync and rename: a directory without it holds no checkpoint.
// DIR/save-<id>-rank<r>.safetensors: the chunks rank r owns, one safetensors tensor each (any
//   standard safetensors reader reads them as they are). <id> is new for every save, so a save
//   into the directory of the previous checkpoint never overwrites a file that checkpoint uses;
//   the files of older saves are removed once the new metadata is committed.
// A replicated chunk is written once, by the rank with coordinate 0 on every mesh dim that does
// not shard it; a plain tensor by the lowest rank holding it. Partial DTensors are reduced first.
//
// Note [Checkpoint loads read only what they need]
// Each rank reads, for each block it holds under its target placements, the byte ranges of the
// saved chunks that overlap the block (pread), in slabs of at most 64 MiB: no tensor is gathered
// anywhere and no rank holds more than a slab beyond its state. Every block a read touches is
// checked against its XXH3 (blocks of 4 MiB), so a corrupted byte is found without reading the
// whole chunk.

#include <cstdint>
#include <future>
#include <map>
#include <string>
#include <variant>

#include "tessera/autograd/nn/module.h"
#include "tessera/autograd/optim/optimizer.h"
#include "tessera/runtime/error.h"
#include "tessera/runtime/tensor.h"

namespace tessera::checkpoint {

// A checkpoint's integrity problems: a checksum mismatch, a truncated or malformed file, an
// incomplete checkpoint (no committed metadata), a save refused or failed.
class CheckpointError : public Error {
  using Error::Error;
};

using Scalar = std::variant<int64_t, double, std::string>;

// Keys as named_parameters() / named_buffers() print them; optimizer state under
// "optim.<fqn>.<field>" (tensors: exp_avg, ...; scalars: the step count) and the groups' options
// as scalars "optim.param_groups.<i>.<option>"; the calling rank's generator as scalars
// "rng.seed" and "rng.offset"; anything else in scalars is the user's.
struct StateDict {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, Scalar> scalars;
};

struct StateDictOptions {
  // false: tensors as they are (DTensors sharded, aliasing the model's and optimizer's storage,
  // so that load fills them in place). true: every DTensor gathered into a plain full tensor.
  bool full_state_dict = false;
  // set_state_dict: missing and unexpected keys are an Error (listed); false skips them.
  bool strict = true;
};

// The model's parameters and buffers and, with an optimizer, its state (materialized before
// its first step: Note [Optimizer state in checkpoints] in autograd/optim/optimizer.h), the
// groups' options and the calling rank's default generator. Errors: an optimizer parameter
// that is not one of the model's.
StateDict get_state_dict(nn::Module& model, optim::Optimizer* optimizer = nullptr,
                         StateDictOptions options = {});
// Copies `state` into the model and optimizer in place, each tensor resharded to the layout of
// what it fills (a full tensor sliced, a DTensor redistributed); sets the step counts, options
// and generator from the scalars present. Errors: missing / unexpected tensor keys (strict),
// shape or dtype mismatch (named).
void set_state_dict(nn::Module& model, optim::Optimizer* optimizer, const StateDict& state,
                    StateDictOptions options = {});

// Every rank of the distributed program calls it with its own state dict (the same keys for the
// DTensors; Note [Checkpoint directory layout]). Errors on every rank: another save into `dir`
// in progress, a failed write (disk full), keys whose dtype or shape differ between ranks.
// Waits for this rank's pending async_save first.
void save(const StateDict& state, const std::string& dir);
// Copies this rank's tensors to staging buffers and returns; the files are written and
// committed in a background thread (over a process group of its own). A later save, async_save
// or load waits for it; its errors are raised by the future's get(). Call get() (or wait())
// before the rank's function returns. On rank threads, the writers' collectives turn off the
// world's deadlock detection (ThreadsOptions::detect_deadlocks): threads other than the ranks
// issue collectives.
std::future<void> async_save(const StateDict& state, const std::string& dir);
// Fills `into` in place from the checkpoint in `dir`: plain tensors whole, DTensors their local
// shards under their own placements, whatever mesh and placements the checkpoint was saved
// from; adds the checkpoint's scalars (a scalar saved with different values per rank, as the
// generator of a data-parallel run, takes this rank's value, or rank 0's when the checkpoint
// had fewer ranks). Errors on every rank: missing / unexpected keys (strict; listed), shape or
// dtype mismatch, a checksum mismatch or truncated file (naming file and tensor), an incomplete
// checkpoint.
void load(StateDict& into, const std::string& dir, bool strict = true);
// Fills `into` from one safetensors file of full tensors (how pretrained weights ship), each
// rank reading only the slices it holds. Errors as load's, without checksums (the format has
// none).
void load_safetensors(StateDict& into, const std::string& file, bool strict = true);

}  // namespace tessera::checkpoint
