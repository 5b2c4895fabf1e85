// Small string helpers shared by config parsing and logging.
#pragma once

#include <string>
#include <vector>

namespace fairway {

std::string toUpper(std::string text);
std::string trim(const std::string& text);
// Splits on sep, trimming items and dropping empty ones.
std::vector<std::string> splitString(const std::string& text, char sep);

}  // namespace fairway
