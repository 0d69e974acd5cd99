package dev.spillway.sink;

import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.Infra;

class SinkEmbeddedIT extends SinkContract {
  @Override
  protected Infra infra() {
    return EmbeddedInfra.get();
  }
}
