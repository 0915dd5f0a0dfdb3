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

}  // namespace passepartout
