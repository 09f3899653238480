#pragma once
// The shortest decimal text that reads back as the same float or double
// (what std::to_chars gives without a precision), about twice as fast: the
// digits come from Dragonbox (the implementation inside {fmt}, which the
// server already links) and the layout is written here. Responses encode
// every output element this way, so on a small model it is a visible part of
// the request's CPU on the HTTP I/O thread.
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
