// Internal to proto: each message of the agent protocol is described once, as a list of fields,
// and its JSON encoder and decoder are derived from that description.
//
// A message type is described by a specialization of Schema beside the code that owns it:
//
//   template <>
//   struct Schema<Started> {
//     static constexpr const char* kName = "started";  // names the payload in errors
//     static constexpr auto kFields = std::tuple(
//         field("pid", &Started::pid, kRequired, {.range = Range{1, kMaxInt}}),
//         field("id", &Started::id, kOmitEmpty),
//         field("log", &Started::log, kOmitEmpty));
//   };
//   HUTCH_PROTO_CODEC(Started)  // encodeMessage(const Started&), decodeMessage<Started>()
//
// and may also have
//   kElementName  what errors call it where it is nested in another message ("A process");
//                 kName if absent;
//   check(const T&) -> Result<>  rules across fields, or the message's validate(); it runs
//                 once every field is decoded (never when encoding).
//
// Field types: std::string, bool, integers, enums (by the names of their EnumNames), described
// messages, std::optional of these, and std::vector of strings, integers or described messages.
// A field whose JSON differs from its member (ProcessInfo's "running") is computed(): a getter
// for the encoder and a setter for the decoder, applied in the listed order.
//
// Decoding reads the fields in the order listed and stops at the first error: a missing
// required field, a value of the wrong JSON type or out of range, or a failed check is
// Errc::kProtocol naming the field (a check may say kInvalidArgument: a good message with a bad
// value). Unknown fields are ignored so that newer peers can add fields without a version bump.
// Keys are written in the JSON library's (sorted) order, so the order of the list is the
// decoder's only.
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/result.h"
#include "proto/json_fields.h"
#include "proto/messages.h"

namespace hutch::proto::detail {

// When a field is on the wire.
enum class Presence {
  kRequired,   // always written; decoding fails without it
  kOptional,   // always written; a missing one keeps the member's default (older peers)
  kOmitEmpty,  // written unless empty ("", false, 0, nullopt, []); a missing one keeps the default
};
using enum Presence;

inline constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
inline constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
inline constexpr int64_t kMaxU32 = std::numeric_limits<uint32_t>::max();

// The description of message T: see the top of this file.
template <class T>
struct Schema;

template <class T>
concept Described = requires {
  { Schema<T>::kName } -> std::convertible_to<std::string_view>;
  Schema<T>::kFields;
};

// The wire names of enum E: a specialization holds
//   static constexpr std::array<std::pair<E, std::string_view>, N> kNames;
//   static Error unknown(std::string_view name);  // the decoder's error for any other name
template <class E>
struct EnumNames;

// E's wire name of value (the first name for a value outside the table).
template <class E>
constexpr std::string_view enumName(E value) {
  for (const auto& [e, name] : EnumNames<E>::kNames) {
    if (e == value) return name;
  }
  return EnumNames<E>::kNames.front().second;
}

template <class E>
Result<E> enumFromName(std::string_view name) {
  for (const auto& [e, n] : EnumNames<E>::kNames) {
    if (n == name) return e;
  }
  return fail(EnumNames<E>::unknown(name));
}

template <class V>
inline constexpr bool kIsOptional = false;
template <class V>
inline constexpr bool kIsOptional<std::optional<V>> = true;
template <class V>
inline constexpr bool kIsMessageList = false;
template <class V>
inline constexpr bool kIsMessageList<std::vector<V>> = Described<V>;
template <class V>
inline constexpr bool kIsIntegerList = false;
template <class V>
inline constexpr bool kIsIntegerList<std::vector<V>> =
    std::is_integral_v<V> && !std::is_same_v<V, bool>;

// The integer a field holds (alone, optional or in a list), or void.
template <class V>
struct IntegerOf {
  using Type = std::conditional_t<std::is_integral_v<V> && !std::is_same_v<V, bool>, V, void>;
};
template <class V>
struct IntegerOf<std::optional<V>> : IntegerOf<V> {};
template <class V>
struct IntegerOf<std::vector<V>> : IntegerOf<V> {};

// What an integer field accepts unless its description narrows it: its type's values that fit
// in int64_t.
template <class V>
constexpr Range typeRange() {
  using I = typename IntegerOf<V>::Type;
  if constexpr (std::is_void_v<I>) {
    return Range{};
  } else {
    constexpr auto kMin = std::numeric_limits<I>::min();
    constexpr auto kMax = std::numeric_limits<I>::max();
    return Range{std::cmp_less(kMin, INT64_MIN) ? INT64_MIN : static_cast<int64_t>(kMin),
                 std::cmp_greater(kMax, INT64_MAX) ? INT64_MAX : static_cast<int64_t>(kMax)};
  }
}

// What a field's decoder checks beyond its JSON type.
template <class V>
struct Rules {
  std::optional<Range> range;   // integers: the values accepted (default: the member type's)
  const char* items = nullptr;  // lists of integers: what the items are, for the error
  // A value check, e.g. an absolute path. Gets the field's name for the error.
  Result<> (*check)(const V& value, const char* field) = nullptr;
};

// One field: its JSON name, when it is on the wire, and where its value lives in T (a member,
// or a getter and a setter).
template <class T, class V>
struct Field {
  const char* name;
  Presence presence;
  V T::*member;
  V (*get)(const T&);
  void (*set)(T&, V);
  Range range;
  const char* items;
  Result<> (*check)(const V&, const char*);
};

template <class T, class V>
constexpr Field<T, V> field(const char* name, V T::*member, Presence presence = kRequired,
                            Rules<V> rules = {}) {
  return {name,        presence,   member, nullptr, nullptr, rules.range.value_or(typeRange<V>()),
          rules.items, rules.check};
}

template <class T, class V>
constexpr Field<T, V> computed(const char* name, V (*get)(const T&), void (*set)(T&, V),
                               Presence presence = kRequired, Rules<V> rules = {}) {
  return {name,        presence,   nullptr, get, set, rules.range.value_or(typeRange<V>()),
          rules.items, rules.check};
}

template <Described T>
constexpr const char* elementName() {
  if constexpr (requires { Schema<T>::kElementName; }) {
    return Schema<T>::kElementName;
  } else {
    return Schema<T>::kName;
  }
}

// What kOmitEmpty leaves out. Enums and messages are never empty.
template <class V>
bool isEmpty(const V& value) {
  if constexpr (std::is_arithmetic_v<V>) {
    return value == V{};
  } else if constexpr (kIsOptional<V>) {
    return !value.has_value();
  } else if constexpr (requires { value.empty(); }) {
    return value.empty();
  } else {
    return false;
  }
}

template <Described T>
Json toJson(const T& message);
template <Described T>
Result<T> fromJson(const Json& j);

template <class V>
Json toWire(const V& value) {
  if constexpr (Described<V>) {
    return toJson(value);
  } else if constexpr (std::is_enum_v<V>) {
    return enumName(value);
  } else if constexpr (kIsOptional<V>) {
    return value ? toWire(*value) : Json();
  } else if constexpr (kIsMessageList<V>) {
    Json items = Json::array();
    for (const auto& item : value) items.push_back(toJson(item));
    return items;
  } else {
    return value;  // strings, bools, integers and lists of them
  }
}

template <class V>
Result<V> fromWire(const Json& j, const char* name, Range range, const char* items) {
  if constexpr (std::is_same_v<V, std::string>) {
    return readString(j, name);
  } else if constexpr (std::is_same_v<V, bool>) {
    return readBool(j, name);
  } else if constexpr (std::is_integral_v<V>) {
    HUTCH_TRY(const int64_t n, readInt(j, name, range));
    return static_cast<V>(n);
  } else if constexpr (std::is_enum_v<V>) {
    HUTCH_TRY(const std::string wire_name, readString(j, name));
    return enumFromName<V>(wire_name);
  } else if constexpr (Described<V>) {
    return fromJson<V>(j);
  } else if constexpr (kIsOptional<V>) {
    HUTCH_TRY(auto value, fromWire<typename V::value_type>(j, name, range, items));
    return V(std::move(value));
  } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
    return readStringList(j, name);
  } else if constexpr (kIsMessageList<V>) {
    HUTCH_TRY_VOID(checkArray(j, name));
    V values;
    values.reserve(j.size());  // what arrived, not what a field claims
    for (const Json& item : j) {
      HUTCH_TRY(auto value, fromJson<typename V::value_type>(item));
      values.push_back(std::move(value));
    }
    return values;
  } else {
    static_assert(kIsIntegerList<V>, "a field type proto/schema.h does not know");
    HUTCH_TRY(const std::vector<int64_t> numbers, readIntList(j, name, range, items));
    return V(numbers.begin(), numbers.end());
  }
}

template <class T, class V>
void writeField(const Field<T, V>& f, const T& message, Json& j) {
  auto write = [&](const V& value) {
    if (f.presence == kOmitEmpty && isEmpty(value)) return;
    j[f.name] = toWire(value);
  };
  if (f.member != nullptr) {
    write(message.*f.member);
  } else {
    write(f.get(message));
  }
}

template <class T, class V>
Result<> readField(const Field<T, V>& f, const Json& j, T& message) {
  auto it = j.find(f.name);
  if (it == j.end()) {
    if (f.presence != kRequired) return ok();
    // A list of objects or numbers says what it must be even when missing.
    if constexpr (kIsMessageList<V> || kIsIntegerList<V>) {
      return fail(badField(f.name, "must be an array"));
    }
    return fail(missingField(f.name));
  }
  HUTCH_TRY(V value, fromWire<V>(*it, f.name, f.range, f.items));
  if (f.check != nullptr) HUTCH_TRY_VOID(f.check(value, f.name));
  if (f.member != nullptr) {
    message.*f.member = std::move(value);
  } else {
    f.set(message, std::move(value));
  }
  return ok();
}

template <Described T>
Json toJson(const T& message) {
  Json j = Json::object();
  std::apply([&](const auto&... fields) { (writeField(fields, message, j), ...); },
             Schema<T>::kFields);
  return j;
}

template <Described T>
Result<T> fromJson(const Json& j) {
  HUTCH_TRY_VOID(checkObject(j, elementName<T>()));
  T message{};
  Result<> status = ok();
  std::apply(
      [&](const auto&... fields) {
        // Stops at the first field that fails.
        (void)(static_cast<bool>(status = readField(fields, j, message)) && ...);
      },
      Schema<T>::kFields);
  if (!status) return tl::unexpected(std::move(status).error());
  if constexpr (requires { Schema<T>::check(message); }) HUTCH_TRY_VOID(Schema<T>::check(message));
  return message;
}

template <Described T>
std::string encode(const T& message) {
  return dump(toJson(message));
}

template <Described T>
Result<T> decode(std::string_view payload) {
  HUTCH_TRY(const Json j, parseObject(payload, Schema<T>::kName));
  return fromJson<T>(j);
}

}  // namespace hutch::proto::detail

// Defines the codec its header declares for message type T (encodeMessage, decodeMessage<T>)
// from Schema<T>. Used once per message, in namespace hutch::proto, after the Schema.
#define HUTCH_PROTO_CODEC(T)                             \
  std::string encodeMessage(const T& message) {          \
    return ::hutch::proto::detail::encode(message);      \
  }                                                      \
  template <>                                            \
  Result<T> decodeMessage<T>(std::string_view payload) { \
    return ::hutch::proto::detail::decode<T>(payload);   \
  }
