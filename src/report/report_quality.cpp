// The quality columns of a report row through frugal eval (docs/eval.md): perplexity of --text
// by the llama.cpp protocol on the bf16 row, which also saves its top-k log-probs; every other
// row is scored against that file (KLD mean / p99, same top-1, ΔPPL).
#include <algorithm>
#include <filesystem>

#include "eval/logits_file.h"
#include "eval/mc.h"
#include "eval/mc_data.h"
#include "eval/perplexity.h"
#include "eval/text_file.h"
#include "report/report_quality.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

namespace frugal::report {

Status measure_quality(const QualityOptions& q, PrecisionRow& row) {
  if (q.text_file.empty()) {
    row.quality_why = "no --text: perplexity and KLD not measured";
    return Status::ok();
  }
  const std::string ref_path = q.out_dir + "/bf16.logits";
  const bool is_ref = row.precision == "bf16";
  if (!is_ref && !std::filesystem::exists(ref_path)) {
    row.quality_why = "no bf16 reference log-probs (the bf16 row did not run or failed)";
    return Status::ok();
  }
  FRUGAL_ASSIGN_OR_RETURN(std::string text, eval::read_text_file(q.text_file));
  FRUGAL_ASSIGN_OR_RETURN(auto tokz, Tokenizer::load(q.tokenizer_dir.empty() ? q.model_dir : q.tokenizer_dir));
  const bool bos = tokz->add_bos_token() && tokz->bos_id() >= 0;
  std::vector<int32_t> tokens = tokz->encode(text, {.add_bos = bos, .parse_special = false});
  // Bound the time: at most max_chunks whole chunks of ctx tokens.
  const int64_t keep = int64_t{q.ctx} * q.max_chunks;
  if (static_cast<int64_t>(tokens.size()) > keep) tokens.resize(static_cast<size_t>(keep));
  FRUGAL_ASSIGN_OR_RETURN(eval::ChunkPlan plan, eval::plan_chunks(static_cast<int64_t>(tokens.size()), q.ctx, 0,
                                                                  q.text_file));
  FRUGAL_ASSIGN_OR_RETURN(eval::ScoringModel m, eval::load_scoring_model(q.model_dir, q.device, q.threads, q.ctx));
  if (is_ref) {
    FRUGAL_ASSIGN_OR_RETURN(
        eval::PplReport r,
        eval::run_ppl(m, tokens, bos ? tokz->bos_id() : -1, plan,
                      {.save_logits = ref_path, .top_k = 32, .model_hash = eval::model_hash(q.model_dir)}));
    row.ppl = r.ppl;
    // bf16 is the reference of every comparison: zero by definition.
    row.delta_ppl = 0;
    row.kld_mean = 0;
    row.kld_p99 = 0;
    row.same_top1 = 1;
  } else {
    FRUGAL_ASSIGN_OR_RETURN(eval::LogitsFile ref, eval::read_logits_file(ref_path));
    FRUGAL_ASSIGN_OR_RETURN(eval::KldReport k, eval::run_kld(m, ref, ref_path));
    row.ppl = k.ppl_q;
    row.delta_ppl = k.delta_ppl;
    row.kld_mean = k.kld.mean;
    row.kld_p99 = k.kld_p99;
    row.same_top1 = k.same_top1.p;
  }
  row.quality_why = "PPL of " + std::to_string(plan.n_chunks) + " chunk(s) of " + std::to_string(q.ctx) +
                    " tokens of " + q.text_file;
  return Status::ok();
}

Status measure_mmlu(const QualityOptions& q, PrecisionRow& row) {
  if (q.mc_dir.empty()) {
    row.mmlu_why = "no --mc: MMLU not measured";
    return Status::ok();
  }
  FRUGAL_ASSIGN_OR_RETURN(eval::McFormat fmt, eval::parse_mc_format("mmlu"));
  FRUGAL_ASSIGN_OR_RETURN(auto subjects, eval::load_mc(q.mc_dir, fmt, {.shots = q.mc_shots, .limit = q.mc_limit}));
  FRUGAL_ASSIGN_OR_RETURN(auto tokz, Tokenizer::load(q.tokenizer_dir.empty() ? q.model_dir : q.tokenizer_dir));
  runtime::EngineOptions eo{.model_dir = q.model_dir, .device = q.device, .threads = q.threads, .max_num_seqs = 64};
  eo.enable_prefix_caching = true;
  FRUGAL_ASSIGN_OR_RETURN(auto engine, runtime::create_engine(eo));
  FRUGAL_ASSIGN_OR_RETURN(auto items, eval::build_mc_items(subjects, *tokz, engine->max_model_len()));
  FRUGAL_ASSIGN_OR_RETURN(eval::McReport r, eval::run_mc(*engine, subjects, items, {.max_in_flight = 64}));
  engine->shutdown();
  row.mmlu = r.micro.p;
  row.mmlu_stderr = r.micro.se;
  row.mmlu_why = std::to_string(r.micro.n) + " questions, " + std::to_string(subjects.size()) + " subjects, " +
                 std::to_string(q.mc_shots) + "-shot (" + q.mc_dir + ")";
  return Status::ok();
}

}  // namespace frugal::report
