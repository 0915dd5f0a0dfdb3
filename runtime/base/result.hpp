// Result<T> and Error: how every expected failure in the runtime is returned.
// Named like std::expected so a move to C++23 is a rename.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace passepartout {

// What kind of thing went wrong; the message says which thing and what to do.
enum class ErrorCode {
  invalid_input,   // malformed text, frame, manifest, JSON, LLM reply
  limit_exceeded,  // size, nesting or count over a configured bound
  not_found,       // missing file, skill, symbol, key
  io_error,        // the operating system refused
  abi_mismatch,    // a library built for another ABI
  refused,         // a check said no: permissions, sha256, dependency, version
  failed,          // a skill hook reported failure or threw
};

const char* to_string(ErrorCode code) noexcept;

struct Error {
  ErrorCode code = ErrorCode::failed;
  std::string message;
};

template <class E>
class Unexpected {
 public:
  explicit Unexpected(E error) : error_(std::move(error)) {}
  E& error() & { return error_; }
  E&& error() && { return std::move(error_); }

 private:
  E error_;
};

inline Unexpected<Error> fail(ErrorCode code, std::string message) {
  return Unexpected<Error>(Error{code, std::move(message)});
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Unexpected<Error> error) : state_(std::in_place_index<1>, std::move(error).error()) {}  // NOLINT

  bool has_value() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & {
    assert(has_value());
    return std::get<0>(state_);
  }
  const T& value() const& {
    assert(has_value());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(has_value());
    return std::get<0>(std::move(state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& {
    assert(!has_value());
    return std::get<1>(state_);
  }
  Error&& error() && {
    assert(!has_value());
    return std::get<1>(std::move(state_));
  }

 private:
  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Unexpected<Error> error) : error_(std::move(error).error()), ok_(false) {}  // NOLINT

  bool has_value() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  const Error& error() const& {
    assert(!ok_);
    return error_;
  }
  Error&& error() && {
    assert(!ok_);
    return std::move(error_);
  }

 private:
  Error error_;
  bool ok_ = true;
};

inline const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_input:
      return "invalid-input";
    case ErrorCode::limit_exceeded:
      return "limit-exceeded";
    case ErrorCode::not_found:
      return "not-found";
    case ErrorCode::io_error:
      return "io-error";
    case ErrorCode::abi_mismatch:
      return "abi-mismatch";
    case ErrorCode::refused:
      return "refused";
    case ErrorCode::failed:
      return "failed";
  }
  return "failed";
}

}  // namespace passepartout
