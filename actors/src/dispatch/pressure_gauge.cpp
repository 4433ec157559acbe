#include "pressure_gauge.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <iostream>
#include <string>

namespace ergon::actors {

pressure_gauge::pressure_gauge(std::vector<pressure_source> sources)
    : sources_(std::move(sources)), logged_(sources_.size(), false) {
  for (auto& s : sources_)
    readings_.push_back({s.name, 0.0});
}

double pressure_gauge::read() {
  double combined = 0;
  for (size_t i = 0; i < sources_.size(); ++i) {
    std::string problem;
    double value = 0;
    try {
      value = sources_[i].read();
      if (std::isnan(value))
        problem = "returned NaN";
    } catch (const std::exception& e) {
      problem = std::string{"threw: "} + e.what();
    } catch (...) {
      problem = "threw an exception that is not a std::exception";
    }
    if (!problem.empty()) {
      ++errors_;
      if (!logged_[i]) {
        logged_[i] = true;
        std::cerr << "ergon: pressure source '" << sources_[i].name << "' " << problem
                  << "; its readings are skipped while this lasts (logged once)\n";
      }
      continue;
    }
    value = std::clamp(value, 0.0, 1.0);
    readings_[i].value = value;
    combined = std::max(combined, value);
  }
  return combined;
}

}  // namespace ergon::actors
