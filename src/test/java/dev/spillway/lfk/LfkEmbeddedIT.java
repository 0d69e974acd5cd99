package dev.spillway.lfk;

import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.Infra;

class LfkEmbeddedIT extends LfkContract {
  @Override
  protected Infra infra() {
    return EmbeddedInfra.get();
  }
}
