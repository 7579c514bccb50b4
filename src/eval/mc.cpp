#include "eval/mc.h"

#include <cmath>
#include <map>

#include "core/thread_pool.h"
#include "eval/engine_jobs.h"
#include "eval/prompt.h"

namespace frugal::eval {

Result<std::vector<McItem>> build_mc_items(const std::vector<McSubject>& subjects, const Tokenizer& tok,
                                           int32_t max_model_len) {
  std::array<std::vector<int32_t>, 4> cont;
  for (int c = 0; c < 4; ++c) {
    cont[static_cast<size_t>(c)] = tok.encode(mc_continuation(c), {.add_bos = false, .parse_special = false});
    if (cont[static_cast<size_t>(c)].empty())
      return internal_error("the tokenizer encodes '" + mc_continuation(c) + "' as no tokens");
  }
  std::vector<McItem> items;
  for (size_t s = 0; s < subjects.size(); ++s)
    for (const McQuestion& q : subjects[s].test) items.push_back({.subject = s, .q = &q, .context = {}, .continuation = cont});
  // Tokenizing the contexts (full MMLU 5-shot: ~40 MB of text) in parallel; the tokenizer is
  // thread-safe.
  ThreadPool::global().parallel_for(static_cast<int64_t>(items.size()), 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      McItem& it = items[static_cast<size_t>(i)];
      it.context = tok.encode(mc_context(subjects[it.subject].name, subjects[it.subject].dev, *it.q),
                              {.add_bos = tok.add_bos_token(), .parse_special = true});
    }
  });
  size_t longest = 0;
  for (const auto& c : cont) longest = std::max(longest, c.size());
  for (const McItem& it : items) {
    // The last scored prefix is context + all but one continuation token; the engine needs
    // one more position to generate into.
    if (static_cast<int64_t>(it.context.size() + longest) > max_model_len)
      return invalid_argument(it.q->file + ":" + std::to_string(it.q->line) + ": the " +
                              std::to_string(subjects[it.subject].dev.size()) + "-shot prompt is " +
                              std::to_string(it.context.size()) + " tokens, too long for the model's context of " +
                              std::to_string(max_model_len) + " (use fewer --shots)");
  }
  return items;
}

Result<McReport> run_mc(runtime::Engine& engine, const std::vector<McSubject>& subjects,
                        const std::vector<McItem>& items, const McRunOptions& opts,
                        const std::function<void(int64_t, int64_t)>& progress) {
  // One job per distinct prompt (context + a continuation's first i tokens), scoring every
  // continuation token that follows it. Usually one job per question: " A".." D" are single
  // tokens after the same context.
  struct Need {
    size_t item;
    int choice;
    size_t token;  // index into the continuation
  };
  std::vector<EngineJob> jobs;
  std::vector<std::vector<Need>> needs;  // per job
  std::vector<int64_t> primer(subjects.size(), -1);
  for (size_t i = 0; i < items.size(); ++i) {
    const McItem& it = items[i];
    std::map<std::vector<int32_t>, size_t> by_prompt;  // prompt -> job
    for (int c = 0; c < 4; ++c) {
      const auto& cont = it.continuation[static_cast<size_t>(c)];
      for (size_t k = 0; k < cont.size(); ++k) {
        std::vector<int32_t> prompt = it.context;
        prompt.insert(prompt.end(), cont.begin(), cont.begin() + static_cast<std::ptrdiff_t>(k));
        auto [pos, fresh] = by_prompt.try_emplace(prompt, jobs.size());
        if (fresh) {
          EngineJob j;
          j.req.prompt = std::move(prompt);
          j.req.sampling.temperature = 0;
          j.req.sampling.max_tokens = 1;
          j.req.sampling.ignore_eos = true;
          // The first job of a subject runs alone; the rest wait for it so that they find the
          // shared few-shot prefix in the prefix cache.
          if (primer[it.subject] < 0) primer[it.subject] = static_cast<int64_t>(jobs.size());
          else j.after = primer[it.subject];
          jobs.push_back(std::move(j));
          needs.emplace_back();
        }
        jobs[pos->second].req.sampling.score_tokens.push_back(cont[k]);
        needs[pos->second].push_back({i, c, k});
      }
    }
  }
  const auto total = static_cast<int64_t>(jobs.size());
  FRUGAL_ASSIGN_OR_RETURN(auto results, run_engine_jobs(engine, std::move(jobs), opts.max_in_flight, [&](int64_t d) {
    if (progress) progress(d, total);
  }));

  McReport rep;
  rep.requests = total;
  rep.questions.resize(subjects.size());
  std::vector<McQuestionResult> per_item(items.size());
  for (size_t j = 0; j < results.size(); ++j) {
    const EngineJobResult& r = results[j];
    if (r.scored.size() != needs[j].size())
      return internal_error("request " + std::to_string(j) + " came back with " + std::to_string(r.scored.size()) +
                            " scored tokens, expected " + std::to_string(needs[j].size()) + " (finish " +
                            runtime::finish_reason_name(r.finish) + ")");
    rep.prompt_tokens += r.prompt_tokens;
    rep.cached_prompt_tokens += r.cached_prompt_tokens;
    for (size_t k = 0; k < needs[j].size(); ++k)
      per_item[needs[j][k].item].loglik[static_cast<size_t>(needs[j][k].choice)] += r.scored[k].logprob;
  }
  int64_t all_correct = 0, all_n = 0;
  double se2 = 0;
  std::vector<int64_t> correct(subjects.size(), 0);
  for (size_t i = 0; i < items.size(); ++i) {
    McQuestionResult& q = per_item[i];
    for (int c = 1; c < 4; ++c)
      if (q.loglik[static_cast<size_t>(c)] > q.loglik[static_cast<size_t>(q.predicted)]) q.predicted = c;
    q.correct = q.predicted == items[i].q->answer;
    correct[items[i].subject] += q.correct ? 1 : 0;
    rep.questions[items[i].subject].push_back(q);
  }
  for (size_t s = 0; s < subjects.size(); ++s) {
    const auto n = static_cast<int64_t>(rep.questions[s].size());
    McSubjectResult sr{.name = subjects[s].name, .accuracy = proportion(correct[s], n)};
    rep.macro += sr.accuracy.p;
    se2 += sr.accuracy.se * sr.accuracy.se;
    all_correct += correct[s];
    all_n += n;
    rep.subjects.push_back(sr);
  }
  if (!subjects.empty()) {
    rep.macro /= static_cast<double>(subjects.size());
    rep.macro_se = std::sqrt(se2) / static_cast<double>(subjects.size());
  }
  rep.micro = proportion(all_correct, all_n);
  return rep;
}

}  // namespace frugal::eval
