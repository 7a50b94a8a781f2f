-- A ledger made by dpkit's service before rho budgets (schema version 3, commit 77e6b09):
-- one analyst, one dataset, a budget, a released charge and a reserved one.
BEGIN TRANSACTION;
CREATE TABLE audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts DOUBLE PRECISION NOT NULL,
            principal TEXT,
            kind TEXT NOT NULL,
            method TEXT,
            path TEXT,
            dataset TEXT,
            query TEXT,
            epsilon BIGINT,
            delta BIGINT,
            status INTEGER,
            outcome TEXT
        );
INSERT INTO "audit" VALUES(1,1.79580632170263838768e+09,'a1','charge',NULL,NULL,'survey','count',500000000000,0,NULL,'reserved 066146bde3f6ee767df081a2');
INSERT INTO "audit" VALUES(2,1.79580632171087765697e+09,'a1','charge',NULL,NULL,'survey','mean',250000000000,100000,NULL,'reserved 066146bde4171d5ee0797bf6');
CREATE TABLE budgets (
            analyst TEXT NOT NULL REFERENCES principals(id),
            dataset TEXT NOT NULL REFERENCES datasets(name),
            epsilon BIGINT NOT NULL CHECK (epsilon >= 0),
            delta BIGINT NOT NULL CHECK (delta >= 0),
            spent_epsilon BIGINT NOT NULL DEFAULT 0,
            spent_delta BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (analyst, dataset),
            CHECK (spent_epsilon <= epsilon AND spent_delta <= delta)
        );
INSERT INTO "budgets" VALUES('a1','survey',2000000000000,1000000,750000000000,100000);
CREATE TABLE "charges" (
            id TEXT PRIMARY KEY,
            analyst TEXT NOT NULL REFERENCES principals(id),
            dataset TEXT NOT NULL REFERENCES datasets(name),
            idem_key TEXT,
            request_json TEXT NOT NULL,
            epsilon BIGINT NOT NULL,
            delta BIGINT NOT NULL,
            status TEXT NOT NULL
                CHECK (status IN ('reserved', 'released', 'failed', 'refunded', 'lost')),
            result_json TEXT,
            created DOUBLE PRECISION NOT NULL,
            finished DOUBLE PRECISION,
            owner TEXT,
            UNIQUE (analyst, idem_key),
            CHECK (status <> 'released' OR result_json IS NOT NULL)
        );
INSERT INTO "charges" VALUES('066146bde3f6ee767df081a2','a1','survey','k1','{"dataset": "survey", "epsilon": 0.5, "query": "count"}',500000000000,0,'released','{"value": 120, "ci": null, "alpha": 0.05, "labels": null}',1.79580632170263838768e+09,1795806321.71013,NULL);
INSERT INTO "charges" VALUES('066146bde4171d5ee0797bf6','a1','survey',NULL,'{"dataset": "survey", "delta": 1e-07, "epsilon": 0.25, "query": "mean"}',250000000000,100000,'reserved',NULL,1.79580632171087765697e+09,NULL,NULL);
CREATE TABLE datasets (
            name TEXT PRIMARY KEY,
            schema_json TEXT NOT NULL,
            total_epsilon BIGINT NOT NULL CHECK (total_epsilon >= 0),
            total_delta BIGINT NOT NULL CHECK (total_delta >= 0),
            spent_epsilon BIGINT NOT NULL DEFAULT 0,
            spent_delta BIGINT NOT NULL DEFAULT 0,
            created DOUBLE PRECISION NOT NULL, version BIGINT NOT NULL DEFAULT 1,
            CHECK (spent_epsilon <= total_epsilon AND spent_delta <= total_delta)
        );
INSERT INTO "datasets" VALUES('survey','{"name": "survey", "columns": [{"name": "age", "type": "float", "bounds": [0, 100]}]}',10000000000000,10000000,750000000000,100000,1.7958063216880598068e+09,1);
CREATE TABLE principals (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            role TEXT NOT NULL CHECK (role IN ('admin', 'analyst')),
            key_hash TEXT NOT NULL,
            created DOUBLE PRECISION NOT NULL
        );
INSERT INTO "principals" VALUES('a1','ana','analyst','0000000000000000000000000000000000000000000000000000000000000000',1.79580632167818427091e+09);
CREATE TABLE request_counts (
            bucket BIGINT NOT NULL,
            status INTEGER NOT NULL,
            count BIGINT NOT NULL,
            PRIMARY KEY (bucket, status)
        );
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO "schema_version" VALUES(1);
INSERT INTO "schema_version" VALUES(2);
INSERT INTO "schema_version" VALUES(3);
CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL CHECK (kind IN ('link', 'session')),
            principal TEXT NOT NULL REFERENCES principals(id),
            key_hash TEXT NOT NULL,
            expires DOUBLE PRECISION NOT NULL
        );
CREATE INDEX audit_by_time ON audit (ts);
CREATE INDEX charges_by_analyst ON charges (analyst, created);
CREATE INDEX charges_by_status ON charges (status);
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('audit',2);
COMMIT;
