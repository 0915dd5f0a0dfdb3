// InlineFunction: std::function without the allocation for small callables.
//
// libstdc++'s std::function keeps a callable inside itself only when it is
// trivially copyable and at most two pointers big, so every lambda holding a
// shared_ptr (a pipeline step, a completion) costs an allocation and a free.
// InlineFunction keeps any callable of up to kInlineSize bytes whose move
// cannot throw inside itself, and the rest on the heap as std::function does.
//
// Otherwise it behaves as std::function for what this code uses of it:
// copyable (the callable must be), an empty one is false and == nullptr, a
// moved-from one is empty, and operator() is const. Calling an empty one is a
// precondition violation (std::function would throw bad_function_call).
#pragma once

#include <cassert>
#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace passepartout {

template <class Signature>
class InlineFunction;

template <class R, class... Args>
class InlineFunction<R(Args...)> {
 public:
  // A step's closure: its Run's shared_ptr and its own captures (another
  // shared_ptr and a Value) fit, with room for one more pointer.
  static constexpr std::size_t kInlineSize = 48;

  InlineFunction() noexcept = default;
  InlineFunction(std::nullptr_t) noexcept {}  // NOLINT(google-explicit-constructor): as std::function

  template <class F, class D = std::decay_t<F>,
            class = std::enable_if_t<!std::is_same_v<D, InlineFunction> && std::is_copy_constructible_v<D> &&
                                     std::is_invocable_r_v<R, D&, Args...>>>
  InlineFunction(F&& f) {  // NOLINT(google-explicit-constructor): as std::function
    if constexpr (std::is_pointer_v<D> || std::is_member_pointer_v<D>) {
      if (f == nullptr) return;
    }
    if constexpr (fits_inline<D>()) {
      ::new (static_cast<void*>(storage_)) D(std::forward<F>(f));
      ops_ = &kInlineOps<D>;
    } else {
      heap() = new D(std::forward<F>(f));
      ops_ = &kHeapOps<D>;
    }
  }

  InlineFunction(const InlineFunction& other) {
    if (other.ops_ != nullptr) {
      other.ops_->copy(other, *this);
      ops_ = other.ops_;
    }
  }
  InlineFunction(InlineFunction&& other) noexcept { take(other); }
  InlineFunction& operator=(const InlineFunction& other) {
    if (this != &other) {
      InlineFunction copy(other);
      reset();
      take(copy);
    }
    return *this;
  }
  InlineFunction& operator=(InlineFunction&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  InlineFunction& operator=(std::nullptr_t) noexcept {
    reset();
    return *this;
  }
  ~InlineFunction() { reset(); }

  // Whether a callable of type F is kept inside (no allocation).
  template <class F>
  static constexpr bool stores_inline() noexcept {
    return fits_inline<std::decay_t<F>>();
  }

  explicit operator bool() const noexcept { return ops_ != nullptr; }
  friend bool operator==(const InlineFunction& f, std::nullptr_t) noexcept { return f.ops_ == nullptr; }

  R operator()(Args... args) const {
    assert(ops_ != nullptr && "an empty InlineFunction was called");
    return ops_->call(const_cast<InlineFunction&>(*this), std::forward<Args>(args)...);
  }

 private:
  struct Ops {
    R (*call)(InlineFunction&, Args&&...);
    void (*copy)(const InlineFunction& from, InlineFunction& to);     // to's storage is empty
    void (*move)(InlineFunction& from, InlineFunction& to) noexcept;  // leaves from's storage empty
    void (*destroy)(InlineFunction&) noexcept;
  };

  template <class D>
  static constexpr bool fits_inline() {
    return sizeof(D) <= kInlineSize && alignof(D) <= alignof(std::max_align_t) &&
           std::is_nothrow_move_constructible_v<D>;
  }

  template <class D>
  D& inline_object() noexcept {
    return *std::launder(reinterpret_cast<D*>(storage_));
  }
  template <class D>
  const D& inline_object() const noexcept {
    return *std::launder(reinterpret_cast<const D*>(storage_));
  }
  void*& heap() noexcept { return *reinterpret_cast<void**>(storage_); }
  void* heap() const noexcept { return *reinterpret_cast<void* const*>(storage_); }

  template <class D>
  static constexpr Ops kInlineOps{
      [](InlineFunction& self, Args&&... args) -> R {
        return static_cast<R>(self.inline_object<D>()(std::forward<Args>(args)...));
      },
      [](const InlineFunction& from, InlineFunction& to) {
        ::new (static_cast<void*>(to.storage_)) D(from.inline_object<D>());
      },
      [](InlineFunction& from, InlineFunction& to) noexcept {
        ::new (static_cast<void*>(to.storage_)) D(std::move(from.inline_object<D>()));
        from.inline_object<D>().~D();
      },
      [](InlineFunction& self) noexcept { self.inline_object<D>().~D(); },
  };

  template <class D>
  static constexpr Ops kHeapOps{
      [](InlineFunction& self, Args&&... args) -> R {
        return static_cast<R>((*static_cast<D*>(self.heap()))(std::forward<Args>(args)...));
      },
      [](const InlineFunction& from, InlineFunction& to) { to.heap() = new D(*static_cast<const D*>(from.heap())); },
      [](InlineFunction& from, InlineFunction& to) noexcept { to.heap() = from.heap(); },
      [](InlineFunction& self) noexcept { delete static_cast<D*>(self.heap()); },
  };

  void take(InlineFunction& other) noexcept {
    if (other.ops_ == nullptr) return;
    other.ops_->move(other, *this);
    ops_ = std::exchange(other.ops_, nullptr);
  }
  void reset() noexcept {
    if (ops_ != nullptr) std::exchange(ops_, nullptr)->destroy(*this);
  }

  alignas(std::max_align_t) unsigned char storage_[kInlineSize];
  const Ops* ops_ = nullptr;
};

}  // namespace passepartout
