// Decimal places for printed figures: rounded numbers for JSON (which then
// shows the shortest form, 2.5 not 2.5000) and fixed-width text for tables
// and CSV (2.5000), so both forms of one figure agree.
#pragma once

#include <string>

namespace sluice {

// v rounded half away from zero to `decimals` places; NaN and infinities are
// returned unchanged (nlohmann-json writes them as null).
double round_to(double v, int decimals);

// v with exactly `decimals` places, as printf's "%.*f" ("nan", "inf" as printf).
std::string fixed(double v, int decimals);

}  // namespace sluice
