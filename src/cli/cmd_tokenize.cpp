// `frugal tokenize`: text on stdin -> token ids; --decode: ids -> text; --chat: render the chat
// template for a messages file. See docs/tokenizer.md.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/mapped_file.h"
#include "tokenizer/jinja/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace frugal::cli {
namespace {

struct TokenizeArgs {
  std::string model;
  bool bos = false;
  bool no_special = false;
  bool decode = false;
  std::string chat_file;
  bool no_generation_prompt = false;
};

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& model) {
  if (model.size() > 5 && model.ends_with(".gguf")) return Tokenizer::load_gguf(model);
  return Tokenizer::load(model);
}

std::string read_stdin() {
  std::ios::sync_with_stdio(false);
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

Status run_decode(const Tokenizer& tok, const TokenizeArgs& a) {
  std::istringstream in(read_stdin());
  std::vector<int32_t> ids;
  std::string word;
  while (in >> word) {
    char* end = nullptr;
    const long v = std::strtol(word.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v >= tok.vocab_size()) {
      return invalid_argument("stdin: \"" + word + "\" is not a token id in 0.." + std::to_string(tok.vocab_size() - 1));
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  const std::string text = tok.decode(ids, /*skip_special=*/a.no_special);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return Status::ok();
}

Status run_chat(const Tokenizer& tok, const TokenizeArgs& a) {
  FRUGAL_ASSIGN_OR_RETURN(std::string text, read_file(a.chat_file));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return invalid_argument(a.chat_file + ": not valid JSON");
  if (j.is_object() && j.contains("messages")) j = j["messages"];
  if (!j.is_array()) return invalid_argument(a.chat_file + ": expected an array of {role, content} messages");
  if (tok.chat_template().empty()) return not_found(a.model + ": the tokenizer has no chat_template");
  jinja::ChatTemplateOptions opts{.add_generation_prompt = !a.no_generation_prompt,
                                  .bos_token = tok.token_text(tok.bos_id()),
                                  .eos_token = tok.token_text(tok.eos_id()),
                                  .tools = nullptr,
                                  .extra_context = nlohmann::json::object()};
  FRUGAL_ASSIGN_OR_RETURN(std::string prompt, jinja::render_chat_template(tok.chat_template(), j, opts));
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  return Status::ok();
}

Status run_tokenize(const TokenizeArgs& a) {
  FRUGAL_ASSIGN_OR_RETURN(auto tok, load_tokenizer(a.model));
  if (a.decode) return run_decode(*tok, a);
  if (!a.chat_file.empty()) return run_chat(*tok, a);
  const auto ids = tok->encode(read_stdin(), {.add_bos = a.bos, .parse_special = !a.no_special});
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
  return Status::ok();
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  args->model = default_model_dir();
  auto* cmd = app.add_subcommand("tokenize", "Text on stdin -> token ids (or --decode ids -> text, --chat FILE)");
  cmd->add_option("--model", args->model, "model directory with tokenizer.json, or a .gguf file")
      ->capture_default_str();
  cmd->add_flag("--bos", args->bos, "add BOS (the post-processor template) in front");
  cmd->add_flag("--no-special", args->no_special,
                "special tokens written in the text are plain text (with --decode: skip special tokens)");
  cmd->add_flag("--decode", args->decode, "read ids from stdin and print the text");
  cmd->add_option("--chat", args->chat_file, "render the chat template for a JSON array of messages");
  cmd->add_flag("--no-generation-prompt", args->no_generation_prompt, "with --chat: add_generation_prompt=false");
  cmd->callback([args] {
    const Status s = run_tokenize(*args);
    if (!s.is_ok()) {
      std::fprintf(stderr, "frugal tokenize: %s\n", s.to_string().c_str());
      set_exit_code(s.code() == ErrorCode::kInvalidArgument ? 2 : 1);
    }
  });
}

}  // namespace frugal::cli
