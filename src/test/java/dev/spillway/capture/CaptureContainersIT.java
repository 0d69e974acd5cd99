package dev.spillway.capture;

import dev.spillway.testing.ContainersInfra;
import dev.spillway.testing.Infra;
import org.testcontainers.junit.jupiter.Testcontainers;

@Testcontainers(disabledWithoutDocker = true)
class CaptureContainersIT extends CaptureContract {
  @Override
  protected Infra infra() {
    return ContainersInfra.get();
  }
}
