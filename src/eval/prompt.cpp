#include "eval/prompt.h"

#include <algorithm>

namespace frugal::eval {

std::string mc_header(const std::string& subject) {
  std::string s = subject;
  std::replace(s.begin(), s.end(), '_', ' ');
  return "The following are multiple choice questions (with answers) about " + s + ".\n\n";
}

std::string mc_question_block(const McQuestion& q, bool with_answer) {
  std::string s = q.question;
  for (int k = 0; k < 4; ++k) {
    s += '\n';
    s += static_cast<char>('A' + k);
    s += ". ";
    s += q.choices[static_cast<size_t>(k)];
  }
  s += "\nAnswer:";
  if (with_answer) {
    s += ' ';
    s += static_cast<char>('A' + q.answer);
    s += "\n\n";
  }
  return s;
}

std::string mc_prefix(const std::string& subject, std::span<const McQuestion> shots) {
  std::string s = mc_header(subject);
  for (const auto& q : shots) s += mc_question_block(q, true);
  return s;
}

std::string mc_context(const std::string& subject, std::span<const McQuestion> shots, const McQuestion& q) {
  return mc_prefix(subject, shots) + mc_question_block(q, false);
}

std::string mc_continuation(int choice) { return std::string(" ") + static_cast<char>('A' + choice); }

}  // namespace frugal::eval
