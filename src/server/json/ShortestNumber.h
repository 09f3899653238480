#pragma once
// The shortest decimal text that reads back as the same float or double
// (what std::to_chars gives without a precision, in less time:
// docs/decisions.md, "Floats written from Dragonbox digits"). The digits
// come from Dragonbox (fmt::detail::dragonbox::to_decimal, inside the {fmt}
// the server already links; an internal {fmt} function, there since {fmt}
// 7.1), the layout is written here. Responses encode every JSON output element this way, so on a
// small model it is a visible part of the HTTP I/O thread's work.
//
// Layout (JSON number syntax, as JavaScript prints numbers): plain digits
// while the decimal point falls within 21 digits of the first one or up to 6
// zeros after it ("120", "0.5", "0.000001"), scientific otherwise ("1e+21",
// "1.5e-7"). Finite values only: the caller spells NaN and infinities.
namespace ortserve {

// Room enough for any finite double's text.
inline constexpr int kShortestNumberMaxChars = 32;

char* WriteShortest(float value, char* out);
char* WriteShortest(double value, char* out);

}  // namespace ortserve
