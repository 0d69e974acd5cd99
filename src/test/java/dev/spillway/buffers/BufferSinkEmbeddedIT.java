package dev.spillway.buffers;

import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.Infra;

class BufferSinkEmbeddedIT extends BufferSinkContract {
  @Override
  protected Infra infra() {
    return EmbeddedInfra.get();
  }
}
