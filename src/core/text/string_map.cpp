#include "trainenv/core/text/string_map.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace trainenv::core {
namespace {

bool key_less(const string_map::entry& a, const string_map::entry& b) {
  return a.key < b.key;
}

}  // namespace

string_map::writer::writer(std::size_t members, std::size_t bytes)
    : bytes_(bytes != 0 ? std::make_unique_for_overwrite<char[]>(bytes) : nullptr) {
  entries_.reserve(members);
}

void string_map::writer::add(std::string_view key, const std::string_view* value) {
  const auto keep = [this](std::string_view text) -> std::string_view {
    if (text.empty()) return {};
    char* at = bytes_.get() + used_;
    std::memcpy(at, text.data(), text.size());
    used_ += text.size();
    return {at, text.size()};
  };
  entry e;
  e.key = keep(key);
  if (value != nullptr) {
    e.value = keep(*value);
    e.is_string = true;
  }
  entries_.push_back(e);
}

string_map string_map::writer::finish() && {
  string_map out(shape::object);
  // The API server writes maps in key order: then there is nothing to sort and no key twice.
  const bool strictly_increasing =
      std::adjacent_find(entries_.begin(), entries_.end(), [](const entry& a, const entry& b) {
        return a.key >= b.key;
      }) == entries_.end();
  if (!strictly_increasing) {
    // Of equal keys the first added is kept, as std::map's emplace keeps it: sorted stably.
    std::stable_sort(entries_.begin(), entries_.end(), key_less);
    entries_.erase(std::unique(entries_.begin(), entries_.end(),
                               [](const entry& a, const entry& b) { return a.key == b.key; }),
                   entries_.end());
  }
  out.bytes_ = std::move(bytes_);
  out.size_ = used_;
  out.entries_ = std::move(entries_);
  return out;
}

string_map::string_map(const string_map& other)
    : bytes_(other.size_ != 0 ? std::make_unique_for_overwrite<char[]>(other.size_) : nullptr),
      size_(other.size_),
      entries_(other.entries_),
      shape_(other.shape_) {
  if (size_ == 0) return;
  std::memcpy(bytes_.get(), other.bytes_.get(), size_);
  // The same offsets into the new copy of the bytes.
  const auto rebase = [&](std::string_view& view) {
    if (!view.empty()) view = {bytes_.get() + (view.data() - other.bytes_.get()), view.size()};
  };
  for (auto& e : entries_) {
    rebase(e.key);
    rebase(e.value);
  }
}

string_map::string_map(string_map&& other) noexcept
    : bytes_(std::move(other.bytes_)),
      size_(std::exchange(other.size_, 0)),
      entries_(std::move(other.entries_)),
      shape_(std::exchange(other.shape_, shape::absent)) {
  other.entries_.clear();
}

string_map& string_map::operator=(string_map&& other) noexcept {
  if (this != &other) {
    bytes_ = std::move(other.bytes_);
    size_ = std::exchange(other.size_, 0);
    entries_ = std::move(other.entries_);
    other.entries_.clear();
    shape_ = std::exchange(other.shape_, shape::absent);
  }
  return *this;
}

string_map& string_map::operator=(const string_map& other) {
  if (this != &other) *this = string_map(other);
  return *this;
}

const std::string_view* string_map::find(std::string_view key) const {
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                                   [](const entry& e, std::string_view k) { return e.key < k; });
  if (it == entries_.end() || it->key != key || !it->is_string) return nullptr;
  return &it->value;
}

}  // namespace trainenv::core
