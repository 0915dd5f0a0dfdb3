// Stream parsers for LLM APIs: server-sent events and newline-delimited JSON.
#include "providers/stream_parser.hpp"

#include <string>

namespace passepartout {

namespace {

std::string too_large(const char* what, std::size_t cap) {
  return std::string(what) + " larger than " + std::to_string(cap) + " bytes";
}

bool is_blank(std::string_view line) noexcept { return line.find_first_not_of(" \t\r") == std::string_view::npos; }

}  // namespace

Result<void> SseParser::feed(std::string_view bytes, const OnEvent& on_event) {
  if (!error_.empty()) return fail(ErrorCode::limit_exceeded, error_);
  std::size_t pos = 0;
  if (skip_lf_ && !bytes.empty()) {
    if (bytes.front() == '\n') pos = 1;
    skip_lf_ = false;
  }
  while (pos < bytes.size()) {
    const std::size_t end = bytes.find_first_of("\r\n", pos);
    if (end == std::string_view::npos) {
      line_.append(bytes.substr(pos));
      break;
    }
    if (line_.empty()) {
      process_line(bytes.substr(pos, end - pos), on_event);
    } else {
      line_.append(bytes.substr(pos, end - pos));
      const std::string line = std::move(line_);
      line_.clear();
      process_line(line, on_event);
    }
    pos = end + 1;
    if (bytes[end] == '\r') {
      if (pos == bytes.size()) {
        skip_lf_ = true;  // the LF of a CRLF may start the next chunk
      } else if (bytes[pos] == '\n') {
        ++pos;
      }
    }
    if (pending_bytes() > max_event_bytes_) break;
  }
  if (pending_bytes() > max_event_bytes_) {
    error_ = too_large("server-sent event", max_event_bytes_);
    line_.clear();
    event_ = SseEvent{};
    return fail(ErrorCode::limit_exceeded, error_);
  }
  return {};
}

void SseParser::finish(const OnEvent& on_event) {
  if (!error_.empty()) return;
  if (line_.empty()) {
    dispatch(on_event);
  } else {
    line_.clear();
    has_data_ = false;
    event_.data.clear();
  }
}

void SseParser::process_line(std::string_view line, const OnEvent& on_event) {
  if (line.empty()) {
    dispatch(on_event);
    return;
  }
  if (line.front() == ':') return;  // a comment, as a keep-alive
  std::string_view field = line;
  std::string_view value;
  if (const std::size_t colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) event_.data.push_back('\n');
    event_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    event_.event.assign(value);
    has_event_ = true;
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) event_.id.assign(value);
  }
  // `retry:` and unknown fields are ignored, as the standard says.
}

void SseParser::dispatch(const OnEvent& on_event) {
  if (has_data_) {
    if (!has_event_ || event_.event.empty()) event_.event = "message";
    on_event(event_);
  }
  event_.data.clear();
  event_.event = "message";
  has_data_ = false;
  has_event_ = false;
}

Result<void> NdjsonParser::feed(std::string_view bytes, const OnLine& on_line) {
  if (!error_.empty()) return fail(ErrorCode::limit_exceeded, error_);
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const std::size_t end = bytes.find('\n', pos);
    if (end == std::string_view::npos) {
      line_.append(bytes.substr(pos));
      break;
    }
    line_.append(bytes.substr(pos, end - pos));
    pos = end + 1;
    if (line_.size() > max_line_bytes_) break;
    emit(on_line);
  }
  if (line_.size() > max_line_bytes_) {
    error_ = too_large("NDJSON line", max_line_bytes_);
    line_.clear();
    return fail(ErrorCode::limit_exceeded, error_);
  }
  return {};
}

void NdjsonParser::finish(const OnLine& on_line) {
  if (error_.empty()) emit(on_line);
}

void NdjsonParser::emit(const OnLine& on_line) {
  std::string line = std::move(line_);
  line_.clear();
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (!is_blank(line)) on_line(line);
}

}  // namespace passepartout
