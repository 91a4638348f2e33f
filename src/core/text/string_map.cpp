#include "trainenv/core/text/string_map.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
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

string_map string_map::writer::finish(std::size_t& first_repeat) && {
  string_map out(shape::object);
  first_repeat = entries_.size();
  // The API server writes maps in key order: then there is nothing to sort and no key twice.
  const bool strictly_increasing =
      std::adjacent_find(entries_.begin(), entries_.end(), [](const entry& a, const entry& b) {
        return a.key >= b.key;
      }) == entries_.end();
  if (!strictly_increasing) {
    // Sorted by key, then by the order added: of each run of equal keys the second is the
    // first repetition met; the earliest of those is the one a reader in order meets first.
    std::vector<std::size_t> order(entries_.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [this](std::size_t a, std::size_t b) {
      return key_less(entries_[a], entries_[b]);
    });
    for (std::size_t i = 1; i < order.size(); ++i) {
      if (entries_[order[i]].key == entries_[order[i - 1]].key)
        first_repeat = std::min(first_repeat, order[i]);
    }
    std::vector<entry> sorted;
    sorted.reserve(entries_.size());
    for (const auto i : order) {
      // Of equal keys the first added is kept, as std::map's emplace keeps it.
      if (!sorted.empty() && sorted.back().key == entries_[i].key) continue;
      sorted.push_back(entries_[i]);
    }
    entries_ = std::move(sorted);
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

string_map string_map::of(const nlohmann::json* at) {
  if (at == nullptr || at->is_null()) return {};
  if (!at->is_object()) return string_map(shape::not_object);
  std::size_t bytes = 0;
  for (const auto& [key, value] : at->items())
    bytes += key.size() + (value.is_string() ? value.get_ref<const std::string&>().size() : 0);
  writer w(at->size(), bytes);
  for (const auto& [key, value] : at->items()) {
    if (value.is_string()) {
      const std::string_view text = value.get_ref<const std::string&>();
      w.add(key, &text);
    } else {
      w.add(key, nullptr);
    }
  }
  std::size_t first_repeat = 0;  // none: a json object holds each key once
  return std::move(w).finish(first_repeat);
}

const std::string_view* string_map::find(std::string_view key) const {
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                                   [](const entry& e, std::string_view k) { return e.key < k; });
  if (it == entries_.end() || it->key != key || !it->is_string) return nullptr;
  return &it->value;
}

}  // namespace trainenv::core
