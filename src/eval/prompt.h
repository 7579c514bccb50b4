// The multiple-choice prompt (docs/eval.md; scripts/gpu/eval_oracles.py builds the same):
//
//   The following are multiple choice questions (with answers) about {subject}.\n\n
//   {question}\nA. {A}\nB. {B}\nC. {C}\nD. {D}\nAnswer: {letter}\n\n     (per shot)
//   {question}\nA. {A}\nB. {B}\nC. {C}\nD. {D}\nAnswer:                  (the test question)
//
// subject: the file's subject name with '_' replaced by ' '. The continuation scored for choice
// X is " X".
#pragma once

#include <span>
#include <string>

#include "eval/mc_data.h"

namespace frugal::eval {

std::string mc_header(const std::string& subject);
// "{question}\nA. ...\nD. {D}\nAnswer:" and, with_answer, " {letter}\n\n".
std::string mc_question_block(const McQuestion& q, bool with_answer);
// Header + shots; the part every question of a subject shares (the prefix cache's hit).
std::string mc_prefix(const std::string& subject, std::span<const McQuestion> shots);
// The whole context for one test question (prefix + its block, ending "Answer:").
std::string mc_context(const std::string& subject, std::span<const McQuestion> shots, const McQuestion& q);
// " A" .. " D".
std::string mc_continuation(int choice);

}  // namespace frugal::eval
