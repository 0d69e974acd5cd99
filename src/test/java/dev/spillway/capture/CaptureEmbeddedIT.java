package dev.spillway.capture;

import dev.spillway.testing.EmbeddedInfra;
import dev.spillway.testing.Infra;

class CaptureEmbeddedIT extends CaptureContract {
  @Override
  protected Infra infra() {
    return EmbeddedInfra.get();
  }
}
