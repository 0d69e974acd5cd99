package dev.spillway.lfk;

import dev.spillway.testing.ContainersInfra;
import dev.spillway.testing.Infra;
import org.testcontainers.junit.jupiter.Testcontainers;

@Testcontainers(disabledWithoutDocker = true)
class LfkContainersIT extends LfkContract {
  @Override
  protected Infra infra() {
    return ContainersInfra.get();
  }
}
