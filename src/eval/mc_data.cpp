#include "eval/mc_data.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "eval/csv.h"
#include "eval/text_file.h"

namespace frugal::eval {
namespace fs = std::filesystem;

Result<McFormat> parse_mc_format(const std::string& name) {
  if (name == "mmlu") return McFormat::kMmlu;
  if (name == "cmmlu") return McFormat::kCmmlu;
  if (name == "mmlu-redux") return McFormat::kMmluRedux;
  return invalid_argument("--format: '" + name + "' is not one of mmlu, cmmlu, mmlu-redux");
}

const char* mc_format_name(McFormat f) {
  switch (f) {
    case McFormat::kMmlu: return "mmlu";
    case McFormat::kCmmlu: return "cmmlu";
    case McFormat::kMmluRedux: return "mmlu-redux";
  }
  return "?";
}

namespace {

std::string trim(std::string s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string where(const std::string& source, int64_t line) { return source + ":" + std::to_string(line); }

Result<int> answer_letter(const std::string& field, const std::string& source, int64_t line) {
  const std::string a = trim(field);
  if (a.size() == 1 && a[0] >= 'A' && a[0] <= 'D') return a[0] - 'A';
  return corrupt(where(source, line) + ": answer '" + a + "' is not one of A, B, C, D");
}

// Fields [first, first + 6): question, A, B, C, D, answer.
Result<McQuestion> question_from(const CsvRecord& r, size_t first, const std::string& source) {
  McQuestion q{.question = r.fields[first], .choices = {}, .answer = 0, .file = source, .line = r.line};
  for (size_t k = 0; k < 4; ++k) q.choices[k] = r.fields[first + 1 + k];
  if (trim(q.question).empty()) return corrupt(where(source, r.line) + ": the question is empty");
  FRUGAL_ASSIGN_OR_RETURN(q.answer, answer_letter(r.fields[first + 5], source, r.line));
  return q;
}

}  // namespace

Result<std::vector<McQuestion>> parse_mmlu_csv(std::string_view text, const std::string& source) {
  FRUGAL_ASSIGN_OR_RETURN(auto recs, parse_csv(text, source));
  std::vector<McQuestion> out;
  for (const auto& r : recs) {
    if (r.fields.size() != 6)
      return corrupt(where(source, r.line) + ": expected 6 columns (question,A,B,C,D,answer), found " +
                     std::to_string(r.fields.size()));
    FRUGAL_ASSIGN_OR_RETURN(McQuestion q, question_from(r, 0, source));
    out.push_back(std::move(q));
  }
  return out;
}

Result<std::vector<McQuestion>> parse_cmmlu_csv(std::string_view text, const std::string& source) {
  FRUGAL_ASSIGN_OR_RETURN(auto recs, parse_csv(text, source));
  if (recs.empty()) return corrupt(source + ": no header line (expected ',Question,A,B,C,D,Answer')");
  const std::vector<std::string> header = {"", "Question", "A", "B", "C", "D", "Answer"};
  std::vector<std::string> got;
  for (const auto& f : recs[0].fields) got.push_back(trim(f));
  if (got != header)
    return corrupt(where(source, recs[0].line) + ": header is not ',Question,A,B,C,D,Answer' (found " +
                   std::to_string(recs[0].fields.size()) + " columns)");
  std::vector<McQuestion> out;
  for (size_t i = 1; i < recs.size(); ++i) {
    const auto& r = recs[i];
    if (r.fields.size() != 7)
      return corrupt(where(source, r.line) + ": expected 7 columns (index,Question,A,B,C,D,Answer), found " +
                     std::to_string(r.fields.size()));
    FRUGAL_ASSIGN_OR_RETURN(McQuestion q, question_from(r, 1, source));
    out.push_back(std::move(q));
  }
  return out;
}

Result<std::vector<ReduxItem>> parse_mmlu_redux_jsonl(std::string_view text, const std::string& source) {
  std::vector<ReduxItem> out;
  int64_t line = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string at = where(source, line);
    nlohmann::json j = nlohmann::json::parse(l, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return corrupt(at + ": not a JSON value");
    if (!j.is_object()) return corrupt(at + ": expected a JSON object");
    if (!j.contains("question") || !j["question"].is_string()) return corrupt(at + ": missing string field 'question'");
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].size() != 4)
      return corrupt(at + ": 'choices' must be an array of 4 strings");
    ReduxItem it;
    it.q.question = j["question"].get<std::string>();
    for (size_t k = 0; k < 4; ++k) {
      if (!j["choices"][k].is_string()) return corrupt(at + ": choices[" + std::to_string(k) + "] is not a string");
      it.q.choices[k] = j["choices"][k].get<std::string>();
    }
    const nlohmann::json& a = j.contains("answer") ? j["answer"] : nlohmann::json();
    if (a.is_number_integer() && a.get<int64_t>() >= 0 && a.get<int64_t>() <= 3) {
      it.q.answer = static_cast<int>(a.get<int64_t>());
    } else if (a.is_string() && a.get<std::string>().size() == 1 && a.get<std::string>()[0] >= 'A' &&
               a.get<std::string>()[0] <= 'D') {
      it.q.answer = a.get<std::string>()[0] - 'A';
    } else {
      return corrupt(at + ": 'answer' must be 0-3 (or a letter A-D), found " + (a.is_null() ? "nothing" : a.dump()));
    }
    const char* key = j.contains("subject") ? "subject" : "_hf_subset";
    if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty())
      return corrupt(at + ": missing string field 'subject' (or '_hf_subset')");
    it.subject = j[key].get<std::string>();
    it.q.file = source;
    it.q.line = line;
    out.push_back(std::move(it));
  }
  return out;
}

namespace {

Result<std::vector<McQuestion>> read_questions(const std::string& path, McFormat format) {
  FRUGAL_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  if (format == McFormat::kCmmlu) return parse_cmmlu_csv(text, path);
  return parse_mmlu_csv(text, path);
}

// Subject names found in `test_dir` (file stems without the "_test" suffix for MMLU).
Result<std::vector<std::string>> list_subjects(const std::string& test_dir, McFormat format) {
  std::error_code ec;
  if (!fs::is_directory(test_dir, ec)) return not_found(test_dir + ": no such directory");
  std::vector<std::string> names;
  const std::string suffix = format == McFormat::kMmlu ? "_test.csv" : ".csv";
  for (const auto& e : fs::directory_iterator(test_dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.size() > suffix.size() && f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0)
      names.push_back(f.substr(0, f.size() - suffix.size()));
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) return not_found(test_dir + ": no *" + suffix + " files");
  return names;
}

Result<std::vector<std::string>> select(const std::vector<std::string>& all, const std::vector<std::string>& wanted,
                                        const std::string& where_) {
  if (wanted.empty()) return all;
  for (const auto& w : wanted)
    if (std::find(all.begin(), all.end(), w) == all.end())
      return not_found("--subjects: '" + w + "' is not a subject of " + where_ + " (" + std::to_string(all.size()) +
                       " subjects, e.g. '" + all.front() + "')");
  return wanted;
}

Status check_subject(const McSubject& s, int32_t shots, const std::string& dev_file, const std::string& test_file) {
  if (static_cast<int64_t>(s.dev.size()) < shots)
    return corrupt(dev_file + ": " + std::to_string(s.dev.size()) + " dev questions, fewer than --shots " +
                   std::to_string(shots));
  if (s.test.empty()) return corrupt(test_file + ": no test questions");
  return Status::ok();
}

}  // namespace

Result<std::vector<McSubject>> load_mc(const std::string& dir, McFormat format, const McLoadOptions& opts) {
  if (opts.shots < 0) return invalid_argument("--shots must be >= 0");
  std::vector<McSubject> out;
  if (format == McFormat::kMmluRedux) {
    const std::string path = dir + "/test.jsonl";
    FRUGAL_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
    FRUGAL_ASSIGN_OR_RETURN(auto items, parse_mmlu_redux_jsonl(text, path));
    std::map<std::string, std::vector<McQuestion>> by_subject;
    for (auto& it : items) by_subject[it.subject].push_back(std::move(it.q));
    std::vector<std::string> all;
    for (const auto& [k, v] : by_subject) all.push_back(k);
    if (all.empty()) return corrupt(path + ": no questions");
    FRUGAL_ASSIGN_OR_RETURN(auto names, select(all, opts.subjects, path));
    for (const auto& name : names) {
      auto& qs = by_subject[name];
      McSubject s{.name = name, .dev = {}, .test = {}};
      const size_t k = std::min(qs.size(), static_cast<size_t>(opts.shots));
      s.dev.assign(qs.begin(), qs.begin() + static_cast<std::ptrdiff_t>(k));
      s.test.assign(qs.begin() + static_cast<std::ptrdiff_t>(k), qs.end());
      FRUGAL_RETURN_IF_ERROR(check_subject(s, opts.shots, path + " (subject " + name + ")", path + " (subject " + name + ")"));
      if (opts.limit > 0 && static_cast<int64_t>(s.test.size()) > opts.limit) s.test.resize(static_cast<size_t>(opts.limit));
      out.push_back(std::move(s));
    }
    return out;
  }
  FRUGAL_ASSIGN_OR_RETURN(auto all, list_subjects(dir + "/test", format));
  FRUGAL_ASSIGN_OR_RETURN(auto names, select(all, opts.subjects, dir + "/test"));
  for (const auto& name : names) {
    const bool mmlu = format == McFormat::kMmlu;
    const std::string test_file = dir + "/test/" + name + (mmlu ? "_test.csv" : ".csv");
    const std::string dev_file = dir + "/dev/" + name + (mmlu ? "_dev.csv" : ".csv");
    McSubject s{.name = name, .dev = {}, .test = {}};
    FRUGAL_ASSIGN_OR_RETURN(s.test, read_questions(test_file, format));
    if (opts.shots > 0) {
      FRUGAL_ASSIGN_OR_RETURN(s.dev, read_questions(dev_file, format));
    }
    FRUGAL_RETURN_IF_ERROR(check_subject(s, opts.shots, dev_file, test_file));
    s.dev.erase(s.dev.begin() + opts.shots, s.dev.end());
    if (opts.limit > 0 && static_cast<int64_t>(s.test.size()) > opts.limit) s.test.resize(static_cast<size_t>(opts.limit));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace frugal::eval
