package gregor.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

/**
 * The AdminClient against a broker, family by family: {"op": "admin", "props", "prefix",
 * "group", "share_group", "transactional_id"} answers {"step": {...}} with one entry per step,
 * each the values the step read back or {"error": "ExceptionClass: message"}. A failing step
 * does not stop the others; the test asserts every entry.
 */
final class Admin {
    private Admin() {}

    @FunctionalInterface
    interface Step {
        Object run() throws Exception;
    }

    static JsonNode run(JsonNode req) throws Exception {
        Properties props = Clients.props(req.path("props"));
        String prefix = req.get("prefix").asText();
        String a = prefix + "-a";
        String b = prefix + "-b";
        String group = req.path("group").asText(null);
        String shareGroup = req.path("share_group").asText(null);
        String txnId = req.path("transactional_id").asText(null);
        TopicPartition a0 = new TopicPartition(a, 0);
        Map<String, Object> steps = new java.util.LinkedHashMap<>();
        try (org.apache.kafka.clients.admin.Admin admin = org.apache.kafka.clients.admin.Admin.create(props)) {
            step(steps, "create_topics", () -> {
                admin.createTopics(List.of(
                        new NewTopic(a, 3, (short) 1).configs(Map.of("retention.ms", "86400000")),
                        new NewTopic(b, 1, (short) 1))).all().get();
                admin.createTopics(List.of(new NewTopic(prefix + "-c", 1, (short) 1)),
                        new CreateTopicsOptions().validateOnly(true)).all().get();
                return "ok";
            });
            step(steps, "list_topics", () -> new ArrayList<>(new java.util.TreeSet<>(admin.listTopics().names().get()))
                    .stream().filter(n -> n.startsWith(prefix)).toList());
            step(steps, "describe_topics", () -> {
                TopicDescription d = admin.describeTopics(List.of(a)).allTopicNames().get().get(a);
                Map<String, Object> out = new TreeMap<>();
                out.put("partitions", d.partitions().size());
                out.put("leaders", d.partitions().stream().map(p -> p.leader().id()).toList());
                out.put("replicas", d.partitions().stream().map(p -> p.replicas().size()).toList());
                out.put("topic_id_set", d.topicId() != null && d.topicId().getMostSignificantBits() != 0);
                out.put("internal", d.isInternal());
                return out;
            });
            step(steps, "create_partitions", () -> {
                admin.createPartitions(Map.of(a, NewPartitions.increaseTo(4))).all().get();
                return admin.describeTopics(List.of(a)).allTopicNames().get().get(a).partitions().size();
            });
            ConfigResource topicA = new ConfigResource(ConfigResource.Type.TOPIC, a);
            step(steps, "describe_configs", () -> {
                Map<ConfigResource, Config> all = admin.describeConfigs(List.of(
                        topicA, new ConfigResource(ConfigResource.Type.BROKER, "1"))).all().get();
                Map<String, Object> out = new TreeMap<>();
                ConfigEntry retention = all.get(topicA).get("retention.ms");
                out.put("retention.ms", List.of(retention.value(), retention.source().name()));
                ConfigEntry parts = all.get(new ConfigResource(ConfigResource.Type.BROKER, "1")).get("num.partitions");
                out.put("broker num.partitions", parts == null ? null : parts.value());
                return out;
            });
            step(steps, "incremental_alter_configs", () -> {
                admin.incrementalAlterConfigs(Map.of(topicA, List.of(
                        new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all().get();
                Config c = admin.describeConfigs(List.of(topicA)).all().get().get(topicA);
                return Map.of("max.message.bytes", c.get("max.message.bytes").value(),
                        "retention.ms", List.of(c.get("retention.ms").value(), c.get("retention.ms").source().name()));
            });
            step(steps, "list_offsets", () -> {
                Properties pp = new Properties();
                pp.putAll(props);
                try (KafkaProducer<byte[], byte[]> p = Clients.producer(pp)) {
                    for (int i = 0; i < 10; i++) {
                        p.send(new ProducerRecord<>(a, 0, 1000L * (i + 1), null, ("v" + i).getBytes())).get();
                    }
                }
                Map<String, Object> out = new TreeMap<>();
                out.put("earliest", admin.listOffsets(Map.of(a0, OffsetSpec.earliest())).partitionResult(a0).get().offset());
                out.put("latest", admin.listOffsets(Map.of(a0, OffsetSpec.latest())).partitionResult(a0).get().offset());
                out.put("max_timestamp", admin.listOffsets(Map.of(a0, OffsetSpec.maxTimestamp())).partitionResult(a0).get().offset());
                out.put("for_timestamp_4500", admin.listOffsets(Map.of(a0, OffsetSpec.forTimestamp(4500))).partitionResult(a0).get().offset());
                return out;
            });
            step(steps, "describe_producers", () -> {
                List<Object> out = new ArrayList<>();
                for (ProducerState s : admin.describeProducers(List.of(a0)).partitionResult(a0).get().activeProducers()) {
                    out.add(Map.of("last_sequence", s.lastSequence(), "epoch", s.producerEpoch()));
                }
                return out;
            });
            step(steps, "delete_records", () -> {
                long low = admin.deleteRecords(Map.of(a0, RecordsToDelete.beforeOffset(3))).lowWatermarks().get(a0).get().lowWatermark();
                long earliest = admin.listOffsets(Map.of(a0, OffsetSpec.earliest())).partitionResult(a0).get().offset();
                return List.of(low, earliest);
            });
            step(steps, "describe_log_dirs", () -> {
                long size = -1;
                for (Map<String, LogDirDescription> dirs : admin.describeLogDirs(List.of(1)).allDescriptions().get().values()) {
                    for (LogDirDescription d : dirs.values()) {
                        if (d.replicaInfos().containsKey(a0)) {
                            size = d.replicaInfos().get(a0).size();
                        }
                    }
                }
                return size;
            });
            step(steps, "describe_cluster", () -> {
                DescribeClusterResult r = admin.describeCluster();
                return Map.of("nodes", r.nodes().get().stream().map(Node::id).sorted().toList(),
                        "cluster_id_set", r.clusterId().get() != null, "controller_set", r.controller().get() != null);
            });
            step(steps, "describe_features", () -> {
                FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
                Map<String, Object> out = new TreeMap<>();
                f.finalizedFeatures().forEach((k, v) -> out.put(k, v.maxVersionLevel()));
                return out;
            });
            if (group != null) {
                step(steps, "list_groups", () -> {
                    Map<String, Object> out = new TreeMap<>();
                    for (GroupListing g : admin.listGroups().all().get()) {
                        if (g.groupId().equals(group) || g.groupId().equals(shareGroup)) {
                            out.put(g.groupId(), List.of(g.type().map(Object::toString).orElse("?"),
                                    g.groupState().map(Object::toString).orElse("?")));
                        }
                    }
                    return out;
                });
                step(steps, "describe_consumer_groups", () -> {
                    ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
                    return Map.of("state", d.groupState().toString(), "type", d.type().toString(), "members", d.members().size());
                });
                step(steps, "list_consumer_group_offsets", () -> offsets(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()));
                step(steps, "alter_consumer_group_offsets", () -> {
                    Map<TopicPartition, OffsetAndMetadata> before = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                    TopicPartition tp = new java.util.TreeMap<String, TopicPartition>(
                            before.keySet().stream().collect(java.util.stream.Collectors.toMap(TopicPartition::toString, t -> t))).firstEntry().getValue();
                    admin.alterConsumerGroupOffsets(group, Map.of(tp, new OffsetAndMetadata(1))).all().get();
                    Map<String, Object> out = new TreeMap<>();
                    out.put("altered", offsets(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()));
                    admin.deleteConsumerGroupOffsets(group, Set.of(tp)).all().get();
                    out.put("after_delete_offsets", offsets(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()));
                    return out;
                });
                step(steps, "delete_consumer_groups", () -> {
                    admin.deleteConsumerGroups(List.of(group)).all().get();
                    return admin.listGroups().all().get().stream().anyMatch(g -> g.groupId().equals(group));
                });
            }
            if (shareGroup != null) {
                step(steps, "describe_share_groups", () -> {
                    ShareGroupDescription d = admin.describeShareGroups(List.of(shareGroup)).describedGroups().get(shareGroup).get();
                    return Map.of("state", d.groupState().toString(), "members", d.members().size());
                });
            }
            if (txnId != null) {
                step(steps, "list_transactions", () -> {
                    Map<String, Object> out = new TreeMap<>();
                    for (TransactionListing t : admin.listTransactions().all().get()) {
                        if (t.transactionalId().equals(txnId)) {
                            out.put(t.transactionalId(), t.state().toString());
                        }
                    }
                    return out;
                });
                step(steps, "describe_transactions", () -> {
                    TransactionDescription d = admin.describeTransactions(List.of(txnId)).description(txnId).get();
                    return Map.of("state", d.state().toString(), "topic_partitions", d.topicPartitions().size());
                });
            }
            ClientQuotaEntity alice = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, prefix + "-alice"));
            step(steps, "client_quotas", () -> {
                admin.alterClientQuotas(List.of(new ClientQuotaAlteration(alice,
                        List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1024.0))))).all().get();
                // Kafka's brokers answer from their metadata image, which follows the controller's
                // log: wait (bounded) until the alteration shows.
                Map<String, Double> got = Map.of();
                for (int i = 0; i < 100 && got.isEmpty(); i++) {
                    got = admin.describeClientQuotas(ClientQuotaFilter.containsOnly(List.of(
                            ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, prefix + "-alice"))))
                            .entities().get().getOrDefault(alice, Map.of());
                    if (got.isEmpty()) {
                        Thread.sleep(100);
                    }
                }
                return got;
            });
            step(steps, "scram_credentials", () -> {
                String user = prefix + "-alice";
                admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(user,
                        new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "alice-secret"))).all().get();
                List<Object> out = new ArrayList<>();
                for (ScramCredentialInfo i : admin.describeUserScramCredentials(List.of(user)).description(user).get().credentialInfos()) {
                    out.add(List.of(i.mechanism().mechanismName(), i.iterations()));
                }
                return out;
            });
            step(steps, "acls", () -> {
                AclBinding binding = new AclBinding(new ResourcePattern(ResourceType.TOPIC, a, PatternType.LITERAL),
                        new AccessControlEntry("User:" + prefix + "-alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
                admin.createAcls(List.of(binding)).all().get();
                Collection<AclBinding> described = admin.describeAcls(new AclBindingFilter(
                        binding.pattern().toFilter(), org.apache.kafka.common.acl.AccessControlEntryFilter.ANY)).values().get();
                Collection<AclBinding> deleted = admin.deleteAcls(List.of(binding.toFilter())).all().get();
                return Map.of("described", described.size(), "deleted", deleted.size());
            });
            step(steps, "reassign_partitions", () -> {
                admin.alterPartitionReassignments(Map.of(a0, Optional.of(new NewPartitionReassignment(List.of(1))))).all().get();
                return admin.listPartitionReassignments().reassignments().get().size();
            });
            step(steps, "elect_leaders", () -> {
                Map<TopicPartition, Optional<Throwable>> r = admin.electLeaders(ElectionType.PREFERRED, Set.of(a0)).partitions().get();
                return r.get(a0).map(t -> t.getClass().getSimpleName()).orElse("elected");
            });
            step(steps, "delete_topics", () -> {
                admin.deleteTopics(List.of(b)).all().get();
                return admin.listTopics().names().get().contains(b);
            });
        }
        return Harness.JSON.valueToTree(steps);
    }

    private static Map<String, Long> offsets(Map<TopicPartition, OffsetAndMetadata> m) {
        Map<String, Long> out = new TreeMap<>();
        m.forEach((tp, o) -> out.put(tp.toString(), o == null ? null : o.offset()));
        return out;
    }

    private static void step(Map<String, Object> steps, String name, Step step) {
        try {
            steps.put(name, step.run());
        } catch (Exception e) {
            Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            Map<String, Object> err = new HashMap<>();
            err.put("error", t.getClass().getSimpleName() + ": " + t.getMessage());
            steps.put(name, err);
        }
    }
}
