// Where the skills that ship with Passepartout are: the installed layout
// (<prefix>/<libdir>/passepartout/plugins, <prefix>/<datadir>/passepartout/manifests,
// with the libdir and datadir this build was configured with) or the build tree.
#pragma once

#include <filesystem>

namespace passepartout {

// $PASSEPARTOUT_PLUGIN_DIR when set; else <exe>/../<libdir>/passepartout/plugins
// when it exists; else <exe>/../plugins (the build tree).
std::filesystem::path default_plugin_dir();
// $PASSEPARTOUT_MANIFEST_DIR when set; else <exe>/../<datadir>/passepartout/manifests
// when it exists; else <exe>/../manifests (the build tree).
std::filesystem::path default_manifest_dir();

// The skill project template `skills new` copies: $PASSEPARTOUT_TEMPLATE_DIR
// when set; else <exe>/../<datadir>/passepartout/template when it exists (the
// SDK's install); else the source tree's sdk/template (a build tree).
std::filesystem::path default_template_dir();
// The prefix the SDK is installed under (for CMAKE_PREFIX_PATH), <exe>/..
// with this build's bindir; empty when the template found is not the
// installed one (a build tree, or $PASSEPARTOUT_TEMPLATE_DIR).
std::filesystem::path installed_sdk_prefix();

}  // namespace passepartout
