package dev.spillway.sink;

import dev.spillway.testing.ContainersInfra;
import dev.spillway.testing.Infra;
import org.testcontainers.junit.jupiter.Testcontainers;

@Testcontainers(disabledWithoutDocker = true)
class SinkContainersIT extends SinkContract {
  @Override
  protected Infra infra() {
    return ContainersInfra.get();
  }
}
