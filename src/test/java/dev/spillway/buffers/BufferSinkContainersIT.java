package dev.spillway.buffers;

import dev.spillway.testing.ContainersInfra;
import dev.spillway.testing.Infra;
import org.testcontainers.junit.jupiter.Testcontainers;

@Testcontainers(disabledWithoutDocker = true)
class BufferSinkContainersIT extends BufferSinkContract {
  @Override
  protected Infra infra() {
    return ContainersInfra.get();
  }
}
