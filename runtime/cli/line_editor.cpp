// The line sources of interactive chat: a stream, or libedit on a terminal.
#include "cli/line_editor.hpp"

#include <fcntl.h>
#include <histedit.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <istream>
#include <system_error>

namespace passepartout::cli {

namespace {

class StreamLines final : public LineReader {
 public:
  explicit StreamLines(std::istream& in) : in_(in) {}

  std::optional<std::string> read(const std::string& /*prompt*/) override {
    std::string line;
    if (!std::getline(in_, line)) return std::nullopt;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
  }
  bool is_terminal() const override { return false; }

 private:
  std::istream& in_;
};

class TerminalEditor final : public LineReader {
 public:
  explicit TerminalEditor(std::filesystem::path history_file)
      : file_(std::move(history_file)),
        editor_(el_init("passepartout", stdin, stdout, stderr)),
        history_(history_init()) {
    if (editor_ == nullptr || history_ == nullptr) return;
    HistEvent event;
    history(history_, &event, H_SETSIZE, static_cast<int>(kHistoryLines));
    history(history_, &event, H_SETUNIQUE, 1);                             // no run of the same line
    if (!file_.empty()) history(history_, &event, H_LOAD, file_.c_str());  // none yet: an empty history
    el_set(editor_, EL_CLIENTDATA, this);
    el_set(editor_, EL_EDITOR, "emacs");
    el_set(editor_, EL_SIGNAL, 1);  // the terminal is restored on a signal, redrawn on a resize
    el_set(editor_, EL_HIST, history, history_);
    el_set(editor_, EL_PROMPT, &TerminalEditor::prompt_of);
    // Ctrl-C at the prompt clears the line instead of ending the client:
    // while editing it is a key (no SIGINT), bound to clear_line.
    el_set(editor_, EL_SETTY, "-d", "-isig", nullptr);
    el_set(editor_, EL_ADDFN, "pp-clear-line", "Clear the line and start a new one", &TerminalEditor::clear_line);
    el_set(editor_, EL_BIND, "^C", "pp-clear-line", nullptr);
    el_source(editor_, nullptr);  // the user's ~/.editrc
  }

  TerminalEditor(const TerminalEditor&) = delete;
  TerminalEditor& operator=(const TerminalEditor&) = delete;

  ~TerminalEditor() override {
    if (editor_ != nullptr) el_end(editor_);
    if (history_ != nullptr) history_end(history_);
  }

  bool usable() const noexcept { return editor_ != nullptr && history_ != nullptr; }

  std::optional<std::string> read(const std::string& prompt) override {
    prompt_ = prompt;
    cleared_ = false;
    int count = 0;
    const char* line = el_gets(editor_, &count);
    if (line == nullptr || count <= 0) {
      if (cleared_) return std::string();
      return std::nullopt;
    }
    std::string text(line, static_cast<std::size_t>(count));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    return text;
  }

  bool is_terminal() const override { return true; }

  void remember(const std::string& line) override {
    HistEvent event;
    history(history_, &event, H_ENTER, line.c_str());
    save();
  }

  bool keep(const std::string& text) override {
    el_push(editor_, text.c_str());
    return true;
  }

 private:
  static char* prompt_of(EditLine* editor) {
    void* self = nullptr;
    el_get(editor, EL_CLIENTDATA, &self);
    return static_cast<TerminalEditor*>(self)->prompt_.data();
  }

  static unsigned char clear_line(EditLine* editor, int /*key*/) {
    void* self = nullptr;
    el_get(editor, EL_CLIENTDATA, &self);
    static_cast<TerminalEditor*>(self)->cleared_ = true;
    const LineInfo* line = el_line(editor);
    el_cursor(editor, static_cast<int>(line->lastchar - line->cursor));
    line = el_line(editor);
    el_deletestr(editor, static_cast<int>(line->cursor - line->buffer));
    std::fputs("^C\n", stdout);
    std::fflush(stdout);
    return CC_NEWLINE;
  }

  // Written owner-only: the file is made 0600 before history writes it.
  void save() {
    if (file_.empty()) return;
    std::error_code ignored;
    if (std::filesystem::create_directories(file_.parent_path(), ignored)) {
      std::filesystem::permissions(file_.parent_path(), std::filesystem::perms::owner_all, ignored);  // as the daemon's
    }
    const int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return;
    const bool private_file = ::fchmod(fd, 0600) == 0;
    ::close(fd);
    if (!private_file) return;
    HistEvent event;
    history(history_, &event, H_SAVE, file_.c_str());
  }

  std::filesystem::path file_;
  EditLine* editor_;
  History* history_;
  std::string prompt_;
  bool cleared_ = false;  // Ctrl-C ended this read
};

}  // namespace

std::unique_ptr<LineReader> stream_lines(std::istream& in) { return std::make_unique<StreamLines>(in); }

std::unique_ptr<LineReader> terminal_editor(const std::filesystem::path& history_file) {
  auto editor = std::make_unique<TerminalEditor>(history_file);
  if (!editor->usable()) return nullptr;
  return editor;
}

}  // namespace passepartout::cli
