// dashboard_page: the web dashboard (runtime/dashboard/index.html, one file
// with its styles and script, no assets from elsewhere), embedded at build
// time.
#pragma once

#include <string>

namespace ergon::runtime {

const std::string& dashboard_html();

}  // namespace ergon::runtime
