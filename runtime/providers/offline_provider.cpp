// The offline provider's single answer.
#include "providers/offline_provider.hpp"

#include <string>

namespace passepartout {

void OfflineProvider::complete(const ProviderRequest& /*request*/, ProviderCompletion done) {
  done(ProviderReply::text(std::string(kReply)));
}

}  // namespace passepartout
