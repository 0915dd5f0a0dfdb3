// Where interactive `passepartout chat` reads its lines: a terminal through
// libedit (line editing, a history kept in the state folder), or plain lines
// from a stream (a pipe, a file, a test). libedit's header stays in
// line_editor.cpp.
#pragma once

#include <cstddef>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

namespace passepartout::cli {

// At most this many lines are kept in the history file.
inline constexpr std::size_t kHistoryLines = 1000;

class LineReader {
 public:
  LineReader() = default;
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  virtual ~LineReader() = default;

  // The next line without its line end; nullopt at the end of input (Ctrl-D
  // on an empty line). On a terminal `prompt` is shown first, and Ctrl-C
  // clears what was typed and returns an empty line; a stream ignores it.
  virtual std::optional<std::string> read(const std::string& prompt) = 0;
  // True for a terminal (prompts are shown, keep() works).
  virtual bool is_terminal() const = 0;
  // Adds `line` to the history (a terminal only; saved at once).
  virtual void remember(const std::string& line) { static_cast<void>(line); }
  // Puts `text` in the next line's edit buffer, to be sent again with Enter
  // or changed first; false when it cannot (a stream).
  virtual bool keep(const std::string& text) {
    static_cast<void>(text);
    return false;
  }
};

// Plain lines from `in` (a trailing '\r' dropped), no prompt, no history.
std::unique_ptr<LineReader> stream_lines(std::istream& in);

// A libedit editor on the terminal at standard input and output (emacs
// keys; ~/.editrc applies). History is read from `history_file` when it
// exists and written back after each remembered line, at most kHistoryLines
// lines, readable by the owner only; a history that cannot be read or
// written is left out, never an error.
std::unique_ptr<LineReader> terminal_editor(const std::filesystem::path& history_file);

}  // namespace passepartout::cli
