#include "model/model.h"

#include "core/huge_pages.h"

namespace detinfer::model {

void Model::forward(const std::vector<SequenceStep>& batch, KvCachePool& kv,
                    std::vector<float>& logits) {
  forward_rows(batch, kv, [&logits](std::size_t n) {
    const std::size_t base = logits.size();
    core::resize_huge(logits, base + n);
    return logits.data() + base;
  });
}

}  // namespace detinfer::model
