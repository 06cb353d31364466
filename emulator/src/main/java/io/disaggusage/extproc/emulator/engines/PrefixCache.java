package io.disaggusage.extproc.emulator.engines;

import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A prefix cache over fixed-size token blocks, as vLLM's and TensorRT-LLM's KV cache managers keep one:
 * a block is identified by the hash of its tokens chained with the hash of the block before it, so a
 * block only matches when the whole prefix up to it matches. Only full blocks are cached, least
 * recently used blocks are evicted first, and at least the last prompt token is always computed (the
 * engines need its logits for the first output token), so a prompt of {@code n} tokens can reuse at most
 * the full blocks within its first {@code n - 1}.
 */
public final class PrefixCache {
  /** vLLM's default block size, and a common TensorRT-LLM {@code tokens_per_block}. */
  public static final int DEFAULT_BLOCK_TOKENS = 16;

  private final int blockTokens;
  private final Map<BlockHash, Boolean> blocks;

  /** A block's identity: 128 bits of SHA-256 over the previous block's identity and this block's tokens. */
  private record BlockHash(long high, long low) {
    static final BlockHash ROOT = new BlockHash(0, 0);
  }

  /**
   * @param blockTokens tokens per block
   * @param capacityBlocks blocks kept before the least recently used is evicted
   */
  public PrefixCache(int blockTokens, int capacityBlocks) {
    if (blockTokens <= 0 || capacityBlocks <= 0) {
      throw new IllegalArgumentException("block size and capacity must be positive");
    }
    this.blockTokens = blockTokens;
    this.blocks =
        new LinkedHashMap<>(16, 0.75f, true) {
          @Override
          protected boolean removeEldestEntry(Map.Entry<BlockHash, Boolean> eldest) {
            return size() > capacityBlocks;
          }
        };
  }

  public int blockTokens() {
    return blockTokens;
  }

  /**
   * Runs a prefill: counts the prompt tokens whose KV is reused from the cache, then caches every full
   * block of the prompt.
   *
   * @return the number of cached (reused) prompt tokens, a multiple of the block size
   */
  public synchronized int prefill(int[] prompt) {
    int reusable = (prompt.length - 1) / blockTokens;
    int hits = 0;
    BlockHash parent = BlockHash.ROOT;
    boolean matching = true;
    for (int block = 0; block < prompt.length / blockTokens; block++) {
      BlockHash hash = hash(parent, prompt, block * blockTokens);
      if (matching && block < reusable && blocks.get(hash) != null) {
        hits++;
      } else {
        matching = false;
        blocks.put(hash, Boolean.TRUE);
      }
      parent = hash;
    }
    return hits * blockTokens;
  }

  /** Blocks held. */
  public synchronized int size() {
    return blocks.size();
  }

  private BlockHash hash(BlockHash parent, int[] tokens, int from) {
    ByteBuffer input = ByteBuffer.allocate(16 + 4 * blockTokens);
    input.putLong(parent.high()).putLong(parent.low());
    for (int i = from; i < from + blockTokens; i++) {
      input.putInt(tokens[i]);
    }
    ByteBuffer digest = ByteBuffer.wrap(sha256().digest(input.array()));
    return new BlockHash(digest.getLong(), digest.getLong());
  }

  private static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java runtime has SHA-256", e);
    }
  }
}
